import { describe, expect, it } from 'vitest';
import { CachedTokensSamples, reportedCachedTokens } from './cached-tokens-samples.js';

describe('CachedTokensSamples', () => {
  it('keeps the last N samples per instance, oldest first', () => {
    const s = new CachedTokensSamples(3);
    for (let i = 1; i <= 5; i++) s.record('a', i, i * 10);
    s.record('b', 7, 7);
    expect(s.of('a')).toEqual([
      { predicted: 3, reported: 30 },
      { predicted: 4, reported: 40 },
      { predicted: 5, reported: 50 },
    ]);
    expect(s.of('b')).toEqual([{ predicted: 7, reported: 7 }]);
    expect(s.of('c')).toEqual([]);
  });
});

describe('reportedCachedTokens (byte scan of an engine answer)', () => {
  it.each<[string, string, number | null]>([
    [
      'vLLM usage',
      '{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":32}},"kv_transfer_params":null}',
      32,
    ],
    ['spaced', '{"usage": {"prompt_tokens_details": {"cached_tokens": 0}}}', 0],
    ['null', '{"usage":{"prompt_tokens_details":{"cached_tokens":null}}}', null],
    ['no details', '{"usage":{"prompt_tokens":40,"prompt_tokens_details":null}}', null],
    [
      'text mentions it first',
      '{"choices":[{"text":"\\"cached_tokens\\": 5"}],"usage":{"prompt_tokens_details":{"cached_tokens":16}}}',
      16,
    ],
  ])('%s', (_name, body, expected) => {
    expect(reportedCachedTokens(Buffer.from(body))).toBe(expected);
  });
});
