import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlockHasher, eventBlockHash } from '../kv-hash/index.js';
import { QWEN3_CHAT_FIXTURE, QWEN3_DIR } from './testing/index.js';
import { TokenizerClient, UnsupportedPromptError, type TokenizeInput } from './index.js';

const golden = (
  JSON.parse(readFileSync(QWEN3_CHAT_FIXTURE, 'utf8')) as { cases: Array<Record<string, unknown>> }
).cases;
const tools = golden.find((c) => c.tools)!;

const BLOCK_HASH = { algo: 'sha256_cbor', blockSize: 16, seed: '0' } as const;
const chat = (content: string): TokenizeInput => ({
  kind: 'chat',
  chat: { messages: [{ role: 'user', content }] },
});

let client: TokenizerClient;
beforeAll(async () => {
  client = await TokenizerClient.start({ dir: QWEN3_DIR, cacheEntries: 2, blockHash: BLOCK_HASH });
});
afterAll(async () => {
  await client.close();
});

describe('TokenizerClient (worker thread)', () => {
  it('tokenises as the golden fixture and hashes the full blocks as the engine would', async () => {
    const input: TokenizeInput = {
      kind: 'chat',
      chat: { messages: tools.messages as unknown[], tools: tools.tools as unknown[] },
    };
    const { tokenIds, blockKeys } = await client.tokenize(input, { cacheSalt: 'tenant-a' });
    expect([...tokenIds]).toEqual(tools.tokenIds);
    const expected = new BlockHasher(BLOCK_HASH)
      .hashes(tokenIds, { cacheSalt: 'tenant-a' })
      .map(eventBlockHash);
    expect(blockKeys && [...blockKeys]).toEqual(expected);
    expect(expected).toHaveLength(Math.floor(tokenIds.length / 16));
  });

  it('caches recent prompts (LRU) and shares one worker call between concurrent equal prompts', async () => {
    const before = { hits: client.hits, misses: client.misses };
    const [a, b] = await Promise.all([client.tokenize(chat('one')), client.tokenize(chat('one'))]);
    expect(a).toBe(b);
    await client.tokenize(chat('two'));
    await client.tokenize(chat('one')); // hit: 'one' becomes the most recent
    await client.tokenize(chat('three')); // evicts 'two'
    expect(client.cacheSize).toBe(2);
    await client.tokenize(chat('two'));
    expect({ hits: client.hits - before.hits, misses: client.misses - before.misses }).toEqual({
      hits: 2,
      misses: 4,
    });
  });

  it('a prompt it cannot reproduce rejects with UnsupportedPromptError and is not cached', async () => {
    const image: TokenizeInput = {
      kind: 'chat',
      chat: { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
    };
    await expect(client.tokenize(image)).rejects.toBeInstanceOf(UnsupportedPromptError);
    await expect(client.tokenize(image)).rejects.toThrow(/content part of type 'image_url'/);
  });

  it('a directory without the files fails to start, in one line', async () => {
    await expect(TokenizerClient.start({ dir: '/nonexistent-model' })).rejects.toThrow(
      'tokenizer /nonexistent-model: no tokenizer.json in /nonexistent-model',
    );
  });

  it('closing rejects calls still waiting', async () => {
    const other = await TokenizerClient.start({ dir: QWEN3_DIR, cacheEntries: 0 });
    const pending = expect(other.tokenize({ kind: 'prompt', prompt: 'x '.repeat(20_000) })).rejects.toThrow(
      'tokenizer closed',
    );
    await other.close();
    await pending;
    await expect(other.tokenize({ kind: 'prompt', prompt: 'y' })).rejects.toThrow('tokenizer closed');
  });
});
