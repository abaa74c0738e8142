import { describe, expect, it } from 'vitest';
import { parseCacheConfigInfo } from './engine-probe.js';

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
