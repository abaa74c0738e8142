import { describe, expect, it } from 'vitest';
import { checkJsonShape } from './json-shape.js';
import { jsonSource, spliceJson } from './json-splice.js';

function sourceOf(text: string | Buffer) {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const members: number[] = [];
  expect(checkJsonShape(bytes, { maxDepth: Infinity, maxKeys: Infinity }, members)).toBe('ok');
  const value = JSON.parse(bytes.toString()) as Record<string, unknown>;
  return { source: jsonSource(bytes, members, value), value, members };
}

const BODY =
  '{"model":"m","messages":[{"role":"user","content":"a \\"quoted\\" {x}: [y],"}],"stream":true,' +
  '"max_tokens":16,"stream_options":{"include_usage":true},"seed":12345678901234567890}';

type Change = (body: Record<string, unknown>) => Record<string, unknown>;

describe('spliceJson', () => {
  it.each<[string, string, Change]>([
    ['unchanged', BODY, (b) => ({ ...b })],
    ['an override', BODY, (b) => ({ ...b, stream: false, max_tokens: 1 })],
    [
      'added keys',
      BODY,
      (b) => ({ ...b, request_id: 'r#a1', kv_transfer_params: { do_remote_decode: true } }),
    ],
    [
      'a removed key',
      BODY,
      (b) => Object.fromEntries(Object.entries(b).filter(([k]) => k !== 'stream_options')),
    ],
    ['every member removed or changed', '{"a":1,"b":2}', () => ({ a: 2, c: [1] })],
    ['the first and last members removed', '{"a":1,"b":2,"c":3}', () => ({ b: 2 })],
    ['whitespace around members', ' {\n "a" : 1 ,\n\t"b" : [ 1 , 2 ] ,"c":"x" }\n', (b) => ({ ...b, b: 0 })],
    ['an escaped key', '{"a\\"b":1,"\\u0063":2}', (b) => ({ ...b, d: 3 })],
    ['non-ASCII text', '{"model":"m","content":"héllo — 世界 😀"}', (b) => ({ ...b, n: 1 })],
    ['a duplicate key kept (the last wins, as parsed)', '{"a":1,"b":2,"a":3}', (b) => ({ ...b, c: 4 })],
    ['a duplicate key overridden (both copies leave)', '{"a":1,"b":2,"a":3}', (b) => ({ ...b, a: 9 })],
    [
      'a nested object replaced by a copy',
      '{"m":[1,2],"k":{"x":1}}',
      (b) => ({ ...b, k: { ...(b.k as object) } }),
    ],
    ['an undefined value is left out', '{"a":1}', (b) => ({ ...b, z: undefined })],
    ['a bigint is written exactly', '{"a":1}', (b) => ({ ...b, room: 2n ** 63n - 1n })],
  ])('%s: parses to what the changed object serialises to', (_name, text, change) => {
    const { source, value } = sourceOf(text);
    expect(source).not.toBeNull();
    const changed = change(value);
    const out = spliceJson(source!, changed).toString();
    const expected = JSON.parse(
      JSON.stringify(changed, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)),
    ) as unknown;
    if (Object.values(changed).some((v) => typeof v === 'bigint'))
      expect(out).toContain(`"room":${2n ** 63n - 1n}`);
    else expect(JSON.parse(out)).toEqual(expected);
  });

  it('copies kept members byte for byte: the client spelling of numbers survives', () => {
    const { source, value } = sourceOf(BODY);
    const out = spliceJson(source!, { ...value, max_tokens: 1 }).toString();
    expect(out).toContain('"seed":12345678901234567890'); // JSON.stringify would round it
    expect(out).toContain(BODY.slice(1, BODY.indexOf(',"max_tokens"'))); // one run, as sent
    expect(out.endsWith(',"max_tokens":1}')).toBe(true); // changed keys after the kept ones, once each
    expect(out.match(/"max_tokens"/g)).toHaveLength(1);
  });

  it.each<[string, string | Buffer]>([
    [
      'not valid UTF-8 (the parser replaced a byte)',
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]),
    ],
    ['a top-level array', '[{"a":1}]'],
    ['an empty object', '{}'],
    [
      'more than 1,024 top-level members',
      `{${Array.from({ length: 1025 }, (_, i) => `"k${i}":1`).join(',')}}`,
    ],
  ])('no source for %s: the leg is serialised whole', (_name, text) => {
    const bytes = typeof text === 'string' ? Buffer.from(text) : text;
    const members: number[] = [];
    checkJsonShape(bytes, { maxDepth: Infinity, maxKeys: Infinity }, members);
    expect(jsonSource(bytes, members, JSON.parse(bytes.toString()))).toBeNull();
  });
});

describe('checkJsonShape members', () => {
  it('lists each top-level member: key start, past the key, member end', () => {
    const text = '{"a":{"b":1,"c":[1,2]},"d":"x,}"}';
    const { members } = sourceOf(text);
    const slices = [];
    for (let m = 0; m < members.length; m += 3)
      slices.push([text.slice(members[m]!, members[m + 1]!), text.slice(members[m]!, members[m + 2]!)]);
    expect(slices).toEqual([
      ['"a"', '"a":{"b":1,"c":[1,2]}'],
      ['"d"', '"d":"x,}"'],
    ]);
  });
});
