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
    const out = Buffer.concat(spliceJson(source!, changed)).toString();
    const expected = JSON.parse(
      JSON.stringify(changed, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)),
    ) as unknown;
    if (Object.values(changed).some((v) => typeof v === 'bigint'))
      expect(out).toContain(`"room":${2n ** 63n - 1n}`);
    else expect(JSON.parse(out)).toEqual(expected);
  });

  it('copies kept members byte for byte: the client spelling of numbers survives', () => {
    const { source, value } = sourceOf(BODY);
    const out = Buffer.concat(spliceJson(source!, { ...value, max_tokens: 1 })).toString();
    expect(out).toContain('"seed":12345678901234567890'); // JSON.stringify would round it
    expect(out).toContain(BODY.slice(1, BODY.indexOf(',"max_tokens"'))); // one run, as sent
    expect(out.endsWith(',"max_tokens":1}')).toBe(true); // changed keys after the kept ones, once each
    expect(out.match(/"max_tokens"/g)).toHaveLength(1);
  });

  // a long prompt: every part proportional to it must be a view of the client's bytes, not a copy
  const prompt = 'x'.repeat(64 * 1024);
  const LONG = `{"model":"m","messages":[{"role":"user","content":"${prompt}"}],"stream":true,"temperature":0.5}`;
  it.each<[string, string, Change, string[]]>([
    [
      'prefill: members changed (one view from the opening brace; a short run joins the tail)',
      LONG,
      (b) => ({ ...b, stream: false, max_tokens: 1 }),
      ['{"model":"m","messages":[…]', ',"temperature":0.5,"stream":false,"max_tokens":1}'],
    ],
    [
      'decode: members added (the whole body but its closing brace is one view)',
      LONG,
      (b) => ({ ...b, kv_transfer_params: { remote_engine_id: 'e' } }),
      [
        '{"model":"m","messages":[…],"stream":true,"temperature":0.5',
        ',"kv_transfer_params":{"remote_engine_id":"e"}}',
      ],
    ],
    [
      'the first member changed: the brace is written (the byte before the run is a comma)',
      LONG,
      (b) => ({ ...b, model: 'n' }),
      ['{', '"messages":[…],"stream":true,"temperature":0.5', ',"model":"n"}'],
    ],
    [
      'a long run after a changed member takes its comma from the client',
      `{"model":"m","stream":true,"messages":[{"role":"user","content":"${prompt}"}],"temperature":0.5}`,
      (b) => ({ ...b, stream: false }),
      ['{"model":"m"', ',"messages":[…],"temperature":0.5', ',"stream":false}'],
    ],
    [
      'whitespace before a long run: its separator is written',
      `{"model":"m","stream":true, "messages":[{"role":"user","content":"${prompt}"}],"temperature":0.5}`,
      (b) => ({ ...b, stream: false }),
      ['{"model":"m",', '"messages":[…],"temperature":0.5', ',"stream":false}'],
    ],
  ])('%s', (_name, text, change, expected) => {
    const { source, value } = sourceOf(text);
    const parts = spliceJson(source!, change(value));
    const shown = parts.map((p) => p.toString().replace(/\[\{"role":"user","content":"x+"\}\]/, '[…]'));
    expect(shown).toEqual(expected);
    for (const part of parts) {
      if (part.length > 1024) expect(part.buffer).toBe(source!.bytes.buffer); // a view, no copy
    }
    const joined = Buffer.concat(parts).toString();
    expect(JSON.parse(joined)).toEqual(JSON.parse(JSON.stringify(change(value))));
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
