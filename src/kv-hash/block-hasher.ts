import { hash as oneShotHash } from 'node:crypto';
import { ByteWriter } from './byte-writer.js';
import { cborArrayHead, cborBytes, cborNull, cborText, cborUint } from './cbor.js';
import { PickleWriter } from './pickle.js';

/**
 * vLLM's prefix-cache block hashes, computed exactly (vllm/v1/core/kv_cache_utils.py, vLLM v0.10.2
 * and later; read at main 001cabc1):
 *
 * - `hash_block_tokens`: a block's hash is `hash_fn((parent, tuple(block_token_ids), extra_keys))`,
 *   where `parent` is the previous block's 32-byte hash, or `NONE_HASH` for the first block;
 *   `extra_keys` is `None` or a tuple.
 * - `get_request_block_hasher`: only full blocks of `block_size` tokens are hashed.
 * - `init_none_hash`: `NONE_HASH = hash_fn(os.getenv("PYTHONHASHSEED"))` — the seed *string* —
 *   and 32 random bytes when PYTHONHASHSEED is unset (then no router can predict a hash).
 * - `generate_block_hash_extra_keys`: LoRA name, then multimodal keys, then `cache_salt` on the
 *   first block only (`start_token_idx == 0`), then prompt-embeds hashes; `None` when empty.
 * - `hash_fn` (vllm/utils/hashing.py): `sha256` = SHA-256 of `pickle.dumps(obj, HIGHEST_PROTOCOL)`;
 *   `sha256_cbor` = SHA-256 of `cbor2.dumps(obj, canonical=True)`. `--prefix-caching-hash-algo`
 *   defaults to `sha256` since v0.10.2 (vllm/config/cache.py `prefix_caching_hash_algo`).
 *
 * Not supported (a caller falls back to approximate prefix routing): multimodal and prompt-embeds
 * extra keys, the `xxhash`/`xxhash_cbor` algorithms, and releases before v0.10.2 (`builtin` default,
 * `sha256_cbor_64bit`, integer parents).
 */

export const BLOCK_HASH_ALGOS = ['sha256', 'sha256_cbor'] as const;
export type BlockHashAlgo = (typeof BLOCK_HASH_ALGOS)[number];

/** Per-request extra keys that vLLM mixes into block hashes. */
export interface BlockHashExtraKeys {
  /** `lora_request.lora_name`: in every block's extra keys. */
  readonly loraName?: string;
  /** The request's `cache_salt`: in the first block's extra keys only. */
  readonly cacheSalt?: string;
}

export interface BlockHasherOptions {
  readonly algo: BlockHashAlgo;
  /** The engine's `--block-size` (tokens per KV block). */
  readonly blockSize: number;
  /** The engine process's PYTHONHASHSEED, as the string it is set to. */
  readonly seed?: string;
}

export interface BlockHashOptions extends BlockHasherOptions {
  readonly extraKeys?: BlockHashExtraKeys;
}

/**
 * Hashes token blocks for one engine configuration. Reuses one encoding buffer: not for concurrent
 * use across threads (each worker makes its own).
 */
export class BlockHasher {
  readonly algo: BlockHashAlgo;
  readonly blockSize: number;
  /** vLLM's NONE_HASH: the first block's parent. */
  readonly noneHash: Buffer;
  private readonly writer = new ByteWriter();
  private readonly pickle = new PickleWriter(this.writer);

  constructor(options: BlockHasherOptions) {
    if (!(BLOCK_HASH_ALGOS as readonly string[]).includes(options.algo))
      throw new Error(
        `unsupported block hash algorithm '${String(options.algo)}' (supported: ${BLOCK_HASH_ALGOS.join(', ')})`,
      );
    if (!Number.isInteger(options.blockSize) || options.blockSize < 1)
      throw new Error(`block size must be a positive integer, got ${options.blockSize}`);
    if (options.seed === undefined)
      throw new Error(
        'a block hash seed is required: vLLM hashes blocks from random bytes unless the engine sets PYTHONHASHSEED; set it there and give the same value here',
      );
    this.algo = options.algo;
    this.blockSize = options.blockSize;
    this.noneHash = this.digest(this.encodeSeed(options.seed));
  }

  /**
   * The hashes of the full blocks of `tokenIds` (a trailing partial block is not hashed), chained from
   * `parent` (default: NONE_HASH, i.e. `tokenIds` starts the prompt).
   */
  hashes(tokenIds: ArrayLike<number>, extraKeys: BlockHashExtraKeys = {}, parent?: Uint8Array): Buffer[] {
    const out: Buffer[] = [];
    let prev: Uint8Array = parent ?? this.noneHash;
    const first = parent === undefined;
    for (let start = 0; start + this.blockSize <= tokenIds.length; start += this.blockSize) {
      const salt = first && start === 0 ? extraKeys.cacheSalt : undefined;
      const hash = this.digest(this.encodeBlock(prev, tokenIds, start, extraKeys.loraName, salt));
      out.push(hash);
      prev = hash;
    }
    return out;
  }

  private digest(bytes: Uint8Array): Buffer {
    // one-shot crypto.hash (Node ≥ 20.12): about twice as fast as createHash for ~100-byte inputs
    return oneShotHash('sha256', bytes, 'buffer');
  }

  private encodeSeed(seed: string): Buffer {
    if (this.algo === 'sha256_cbor') {
      this.writer.reset();
      cborText(this.writer, seed);
      return this.writer.view();
    }
    this.pickle.start();
    this.pickle.boundary();
    this.pickle.str(seed);
    return this.pickle.finish();
  }

  /**
   * `(parent, tuple(tokens[start:start+blockSize]), extra_keys)` serialised by the algorithm — the
   * bytes that are hashed (public for tests and diagnostics; a view, valid until the next call).
   */
  encodeBlock(
    parent: Uint8Array,
    tokenIds: ArrayLike<number>,
    start: number,
    loraName: string | undefined,
    cacheSalt: string | undefined,
  ): Buffer {
    // extra keys in vLLM's order: LoRA name, (multimodal: unsupported), cache salt — None when empty
    const extras = (loraName !== undefined ? 1 : 0) + (cacheSalt ? 1 : 0);
    const end = start + this.blockSize;
    if (this.algo === 'sha256_cbor') {
      const w = this.writer;
      w.reset();
      cborArrayHead(w, 3);
      cborBytes(w, parent);
      cborArrayHead(w, this.blockSize);
      for (let i = start; i < end; i++) cborUint(w, tokenIds[i]!);
      if (extras === 0) cborNull(w);
      else {
        cborArrayHead(w, extras);
        if (loraName !== undefined) cborText(w, loraName);
        if (cacheSalt) cborText(w, cacheSalt);
      }
      return w.view();
    }
    const p = this.pickle;
    p.start();
    p.boundary();
    p.tupleStart(3);
    p.boundary();
    p.bytes(parent);
    p.boundary();
    p.tupleStart(this.blockSize);
    for (let i = start; i < end; i++) {
      p.boundary();
      p.int(tokenIds[i]!);
    }
    p.tupleEnd(this.blockSize);
    p.boundary();
    if (extras === 0) p.none();
    else {
      p.tupleStart(extras);
      if (loraName !== undefined) {
        p.boundary();
        p.str(loraName);
      }
      if (cacheSalt) {
        p.boundary();
        p.str(cacheSalt);
      }
      p.tupleEnd(extras);
    }
    p.tupleEnd(3);
    return p.finish();
  }
}

/** One-shot form of {@link BlockHasher.hashes}. */
export function blockHashes(tokenIds: ArrayLike<number>, options: BlockHashOptions): Buffer[] {
  return new BlockHasher(options).hashes(tokenIds, options.extraKeys);
}

/**
 * A block hash as vLLM's KV events carry it by default: `int.from_bytes(hash, "big")` masked to 64
 * bits, i.e. the last 8 bytes read big-endian (kv_cache_utils.py `maybe_convert_block_hash`, with
 * VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES defaulting to 1 in vllm/envs.py). With that variable set to 0
 * the events carry the 32 bytes themselves; folding them with this function gives the same key.
 */
export function eventBlockHash(hash: Uint8Array): bigint {
  if (hash.length < 8) throw new Error(`a block hash has at least 8 bytes, got ${hash.length}`);
  return Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength).readBigUInt64BE(hash.length - 8);
}
