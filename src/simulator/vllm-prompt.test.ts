import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { blockHashes, eventBlockHash, predictedCachedTokens, type BlockHashAlgo } from '../kv-hash/index.js';
import { ModelTokenizer } from '../model-tokenizer/index.js';
import { QWEN3_DIR } from '../model-tokenizer/testing/index.js';
import type { SimBlockKey } from './prefix-cache.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { post } from './testing/index.js';

/**
 * `motor sim --tokenizer`: prompts tokenised by the model's tokenizer and blocks named by vLLM's
 * block hashes (what its KV events then carry), `cache_salt` in the first block's hash. Before this
 * option the simulator tokenised with cl100k and published its own 53-bit keys: every assertion on
 * keys and prompt_tokens below failed.
 */

const BLOCK = 16;
const messages = (turn: string) => [
  { role: 'system', content: 'You are a terse assistant. '.repeat(8) },
  { role: 'user', content: turn },
];

describe.each(['sha256', 'sha256_cbor'] as const)('simulator hashing blocks the vLLM way (%s)', (algo) => {
  let sim: RunningSimulator;
  let tokenizer: ModelTokenizer;
  const stored: SimBlockKey[][] = [];
  beforeAll(async () => {
    [sim, tokenizer] = await Promise.all([
      startSimulator(
        { timeScale: 0, blockSize: BLOCK, tokenizer: QWEN3_DIR, prefixCachingHashAlgo: algo, hashSeed: '0' },
        createLogger('vllm-prompt-test', 'silent'),
      ),
      ModelTokenizer.load(QWEN3_DIR),
    ]);
    sim.core.cache.listener = {
      stored: (h) => void stored.push([...h]),
      removed: () => {},
      cleared: () => {},
    };
  });
  afterAll(() => sim.close());

  const expected = (ids: number[], algo: BlockHashAlgo, cacheSalt?: string) =>
    blockHashes(ids, { algo, blockSize: BLOCK, seed: '0', extraKeys: { cacheSalt } }).map(eventBlockHash);
  const chat = (body: Record<string, unknown>) =>
    post(sim.url, '/v1/chat/completions', { model: 'motor-sim-7b', max_tokens: 1, ...body });

  it("counts the model's tokens, keys its cache by vLLM's hashes, and reports the predicted hit", async () => {
    const msgs = messages('What is a KV cache?');
    const ids = tokenizer.chatTokenIds({ messages: msgs, addGenerationPrompt: true });
    stored.length = 0;
    const first = await chat({ messages: msgs });
    expect(first.status).toBe(200);
    expect(first.json.usage.prompt_tokens).toBe(ids.length);
    expect(stored.flat()).toEqual(expected(ids, algo));
    const second = await chat({ messages: msgs });
    const full = Math.floor(ids.length / BLOCK);
    expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(
      predictedCachedTokens(full, ids.length, BLOCK),
    );
  });

  it('mixes cache_salt into the first block only: a salted prompt shares nothing with the unsalted one', async () => {
    const msgs = messages('Salted question?');
    const ids = tokenizer.chatTokenIds({ messages: msgs, addGenerationPrompt: true });
    await chat({ messages: msgs });
    stored.length = 0;
    const salted = await chat({ messages: msgs, cache_salt: 'tenant-a' });
    expect(salted.json.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(stored.flat()).toEqual(expected(ids, algo, 'tenant-a'));
  });

  it('completions prompts are tokenised with special tokens added, as vLLM does', async () => {
    const prompt = 'The quick brown fox jumps over the lazy dog. '.repeat(6);
    stored.length = 0;
    const r = await post(sim.url, '/v1/completions', { model: 'motor-sim-7b', prompt, max_tokens: 1 });
    const ids = tokenizer.promptTokenIds(prompt);
    expect(r.json.usage.prompt_tokens).toBe(ids.length);
    expect(stored.flat()).toEqual(expected(ids, algo));
  });
});

describe("--max-model-len with --tokenizer counts the model's tokens", () => {
  // Qwen3's chat template gives this prompt more tokens than the simulator's own tokeniser (148 vs
  // 130), so before the check moved after tokenisation the over-long request was served (200).
  const msgs = messages('été 中文 ✓✓✓ 1234567890 '.repeat(5));
  let sim: RunningSimulator;
  let modelTokens: number;
  beforeAll(async () => {
    const tokenizer = await ModelTokenizer.load(QWEN3_DIR);
    modelTokens = tokenizer.chatTokenIds({ messages: msgs, addGenerationPrompt: true }).length;
    sim = await startSimulator(
      { timeScale: 0, tokenizer: QWEN3_DIR, maxModelLen: modelTokens + 1 },
      createLogger('vllm-prompt-test', 'silent'),
    );
  });
  afterAll(() => sim.close());

  it.each([
    [1, 200],
    [2, 400],
  ])('prompt + max_tokens %d → %d', async (maxTokens, status) => {
    const r = await post(sim.url, '/v1/chat/completions', {
      model: 'motor-sim-7b',
      messages: msgs,
      max_tokens: maxTokens,
    });
    expect(r.status).toBe(status);
    if (status === 400) expect(r.json.error.message).toContain(`(${modelTokens} in the messages`);
    else expect(r.json.usage.prompt_tokens).toBe(modelTokens);
  });
});
