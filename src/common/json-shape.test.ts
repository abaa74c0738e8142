import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from './body-reader.js';
import { checkJsonShape, type JsonShapeVerdict } from './json-shape.js';

const nested = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
const keys = (n: number): string => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}}`;
const check = (text: string, maxDepth: number, maxKeys = Infinity): JsonShapeVerdict =>
  checkJsonShape(Buffer.from(text), { maxDepth, maxKeys });

describe('checkJsonShape', () => {
  it.each<[string, string, number, number, JsonShapeVerdict]>([
    ['a scalar', '1', 0, 0, 'ok'],
    ['a string with brackets and colons', '"[{:}]"', 0, 0, 'ok'],
    ['{} at depth 0', '{}', 0, Infinity, 'too_deep'],
    ['{} at depth 1', '{}', 1, Infinity, 'ok'],
    ['{"a":{}} at depth 1', '{"a":{}}', 1, Infinity, 'too_deep'],
    ['{"a":[1,2]} at depth 2', '{"a":[1,2]}', 2, Infinity, 'ok'],
    ['deep on a late branch', '{"a":1,"b":[{"c":{"d":{}}}]}', 3, Infinity, 'too_deep'],
    ['512 levels at the default limit', nested(512), MAX_JSON_DEPTH, Infinity, 'ok'],
    ['513 levels at the default limit', nested(513), MAX_JSON_DEPTH, Infinity, 'too_deep'],
    ['a wide flat object at its key limit', keys(1000), 1, 1000, 'ok'],
    ['one key over the limit', keys(1001), 1, 1000, 'too_many_keys'],
    ['keys in nested objects add up', '[{"a":1},{"b":{"c":2}}]', 3, 2, 'too_many_keys'],
    ['escaped quotes do not end a string', '{"a\\":":"\\":\\"::"}', 1, 1, 'ok'],
    ['an escaped backslash before the closing quote', '{"a\\\\":"b"}', 1, 1, 'ok'],
    ['brackets inside strings', '{"a":"[[[[{{{{"}', 1, 1, 'ok'],
    ['an unterminated string ends the scan', '{"a":"[[[[', 1, 1, 'ok'],
  ])('%s → %s', (_name, text, maxDepth, maxKeys, expected) => {
    expect(check(text, maxDepth, maxKeys)).toBe(expected);
  });

  it('agrees with JSON.parse on what it counts (keys and depth of valid JSON)', () => {
    const value = {
      model: 'm',
      messages: [{ role: 'user', content: 'a "quoted" {text}: \\ [x]' }],
      n: [[1], { k: null }],
    };
    const text = JSON.stringify(value);
    expect(check(text, 3, 6)).toBe('ok'); // model, messages, role, content, n, k; 3 levels
    expect(check(text, 2, 6)).toBe('too_deep');
    expect(check(text, 3, 5)).toBe('too_many_keys');
  });

  it('scans 100k levels without recursing', () => {
    expect(check(nested(100_000), MAX_JSON_DEPTH)).toBe('too_deep');
    expect(check(nested(100_000), Number.MAX_SAFE_INTEGER)).toBe('ok');
  });
});
