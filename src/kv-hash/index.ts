export {
  BLOCK_HASH_ALGOS,
  BlockHasher,
  blockHashes,
  eventBlockHash,
  type BlockHashAlgo,
  type BlockHashExtraKeys,
  type BlockHasherOptions,
  type BlockHashOptions,
} from './block-hasher.js';
export { predictedCachedTokens } from './cached-tokens.js';
