import { describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../../test/fixtures/engines/load.js';
import { parseEngineMetrics } from './engine-metrics-scraper.js';

describe('parseEngineMetrics reads vLLM and SGLang load series alike (fixtures README fact 20)', () => {
  it.each([['vllm/openai/metrics.prom'], ['sglang/server/metrics.prom']])(
    '%s → running 3, waiting 1, KV usage 0.42',
    (fixture) => {
      const text = loadEngineFixture(fixture).body as string;
      expect(parseEngineMetrics(text, 5)).toEqual({
        num_requests_running: 3,
        num_requests_waiting: 1,
        kv_cache_usage_perc: 0.42,
        scraped_at_ms: 5,
      });
    },
  );

  it.each([
    [
      'sums SGLang queues over label sets',
      'sglang:num_queue_reqs{dp_rank="0"} 2\nsglang:num_queue_reqs{dp_rank="1"} 3',
      { num_requests_waiting: 5 },
    ],
    [
      'maxes SGLang token usage over label sets',
      'sglang:token_usage{dp_rank="0"} 0.2\nsglang:token_usage{dp_rank="1"} 0.7',
      { kv_cache_usage_perc: 0.7 },
    ],
    [
      'ignores other sglang:* series',
      'sglang:num_running_reqs 1\nsglang:gen_throughput 99',
      { num_requests_running: 1, num_requests_waiting: 0 },
    ],
  ])('%s', (_name, text, expected) => {
    expect(parseEngineMetrics(text, 1)).toMatchObject(expected);
  });

  it('is null when only non-load sglang series are present', () => {
    expect(parseEngineMetrics('sglang:gen_throughput 12', 1)).toBeNull();
  });
});
