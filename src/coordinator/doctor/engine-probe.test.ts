import { describe, expect, it } from 'vitest';
import type { Instance } from '../fleet/instance-source.js';
import { engineTokens, parseCacheConfigInfo, type ProbeInput } from './engine-probe.js';

describe('parseCacheConfigInfo (vLLM vllm:cache_config_info labels)', () => {
  it.each<[string, string, ReturnType<typeof parseCacheConfigInfo>]>([
    [
      'vLLM gauge',
      '# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n' +
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",prefix_caching_hash_algo="sha256_cbor"} 1.0\n',
      { blockSize: 16, hashAlgo: 'sha256_cbor' },
    ],
    [
      'older release without the algo',
      'vllm:cache_config_info{block_size="32",engine="0"} 1.0',
      { blockSize: 32, hashAlgo: null },
    ],
    ['block_size None', 'vllm:cache_config_info{block_size="None"} 1.0', { blockSize: null, hashAlgo: null }],
    ['absent (SGLang, simulator)', 'sglang:num_running_reqs 0\n', null],
  ])('%s', (_name, text, expected) => {
    expect(parseCacheConfigInfo(text)).toEqual(expected);
  });
});

describe('engineTokens (tokenize route, else usage.prompt_tokens)', () => {
  type Reply = { status: number; body: unknown };
  const fake = (replies: Record<string, Reply>) => {
    const calls: string[] = [];
    const up = {
      request: async (_i: unknown, req: { path: string; body?: string }) => {
        calls.push(`${req.path} ${req.body ?? ''}`);
        const r = replies[req.path] ?? { status: 404, body: { error: { message: 'no route' } } };
        return { statusCode: r.status, body: { text: async () => JSON.stringify(r.body) } };
      },
    } as unknown as Parameters<typeof engineTokens>[0];
    return { up, calls };
  };
  const vllm = { id: 'e0', url: 'http://e0', engine: 'vllm' } as unknown as Instance;
  const sglang = { ...vllm, engine: 'sglang' } as Instance;
  const chat = { messages: [{ role: 'user', content: 'hi' }] };

  it.each<[string, Instance, ProbeInput, Record<string, Reply>, unknown]>([
    [
      'vLLM tokenize',
      vllm,
      chat,
      { '/tokenize': { status: 200, body: { count: 2, tokens: [1, 2] } } },
      { tokens: [1, 2], via: 'POST /tokenize' },
    ],
    [
      'no tokenize route: a one-token request',
      vllm,
      chat,
      { '/v1/chat/completions': { status: 200, body: { usage: { prompt_tokens: 9 } } } },
      { count: 9, via: 'usage.prompt_tokens of POST /v1/chat/completions' },
    ],
    [
      'SGLang prompt: /v1/tokenize',
      sglang,
      { prompt: 'x' },
      { '/v1/tokenize': { status: 200, body: { tokens: [5] } } },
      { tokens: [5], via: 'POST /v1/tokenize' },
    ],
    [
      'SGLang chat: no chat tokenize, usage',
      sglang,
      chat,
      { '/v1/chat/completions': { status: 200, body: { usage: { prompt_tokens: 4 } } } },
      { count: 4, via: 'usage.prompt_tokens of POST /v1/chat/completions' },
    ],
    [
      'tokenize fails',
      vllm,
      chat,
      { '/tokenize': { status: 500, body: { error: 'boom' } } },
      { error: 'POST /tokenize answered 500: {"error":"boom"}' },
    ],
  ])('%s', async (_name, instance, input, replies, expected) => {
    const { up } = fake(replies);
    expect(await engineTokens(up, instance, 'm', input, 1000)).toEqual(expected);
  });
});
