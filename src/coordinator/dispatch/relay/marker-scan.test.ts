import { describe, expect, it } from 'vitest';
import { MarkerScan } from './marker-scan.js';

const MARKERS = ['data: [DONE]', 'data: {"error"', '"recomputed"', '"_motor_', 'token_ids"', '"usage":{'].map(
  (m) => Buffer.from(m),
);
const scan = new MarkerScan(MARKERS);
const includesAny = (buf: Buffer): boolean => MARKERS.some((m) => buf.includes(m));
/** `anchorIn` by definition: the least anchor (first `"` or `[`) of a marker's first occurrence from `from`. */
const firstAnchor = (buf: Buffer, from: number): number => {
  let best = -1;
  for (const m of MARKERS) {
    const at =
      m.indexOf('"') < 0
        ? m.indexOf('[')
        : m.indexOf('[') < 0
          ? m.indexOf('"')
          : Math.min(m.indexOf('"'), m.indexOf('['));
    const k = buf.indexOf(m, from);
    if (k >= 0 && (best < 0 || k + at < best)) best = k + at;
  }
  return best;
};

describe('MarkerScan', () => {
  it.each<[string, string, boolean]>([
    ['a plain frame', 'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n', false],
    ['[DONE] after frames', 'data: {"id":"x"}\n\ndata: [DONE]\n\n', true],
    ['[DONE] as text', 'data: {"choices":[{"text":"data: [DONE]"}]}\n\n', true],
    ['an error frame', 'data: {"error":{"message":"m"}}\n\n', true],
    ['"error" not first', 'data: {"id":"x","error":{}}\n\n', false],
    ['marker at the very start', '"recomputed"', true],
    ['marker cut at the end', 'data: {"stop_reason":"recomputed', false],
    ['anchor not first (token_ids")', '{"prompt_token_ids":[1]}', true],
    ['escaped quote is no key', '{"content":"token_ids\\""}', false],
    ['usage without object', '{"usage":null}', false],
    ['usage with object', '{"usage":{"a":1}}', true],
    ['empty', '', false],
    ['a lone quote', '"', false],
    ['a lone bracket', '[', false],
  ])('%s', (_name, text, want) => {
    const buf = Buffer.from(text);
    expect(includesAny(buf)).toBe(want); // the table means what it says
    expect(scan.anchorIn(buf) >= 0).toBe(want);
  });

  it.each<[string, string, number, number]>([
    ['none', 'data: {"id":"x"}\n\n', 0, -1],
    ['at its anchor, not its start', 'data: {"id":"x"}\n\ndata: [DONE]\n\n', 0, 24],
    ['the first of two', '{"usage":{},"_motor_x":1}', 0, 1],
    ['from past the first', '{"usage":{},"_motor_x":1}', 2, 12],
    ['one starting before `from` is not found', '{"usage":{}}', 2, -1],
    ['anchor not first (token_ids")', '{"prompt_token_ids":[1]}', 0, 18],
  ])('anchorIn: %s', (_name, text, from, want) => {
    const buf = Buffer.from(text);
    expect(firstAnchor(buf, from)).toBe(want); // the table means what it says
    expect(scan.anchorIn(buf, from)).toBe(want);
  });

  it('answers as one Buffer.includes per marker (and anchorIn as its definition) on generated input', () => {
    // deterministic pseudo-random splices of marker pieces, quotes and brackets into JSON-ish text
    let seed = 7;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const pieces = [
      ...MARKERS.map((m) => m.toString()),
      ...MARKERS.map((m) => m.toString().slice(0, 1 + rnd(m.length - 1))),
      ...MARKERS.map((m) => m.toString().slice(1)),
      '"',
      '[',
      'data: ',
      '{"id":"x"}',
      '\n\n',
      'token_ids',
      'é',
    ];
    let agree = 0;
    let found = 0;
    for (let i = 0; i < 20_000; i++) {
      let text = '';
      const parts = 1 + rnd(5);
      for (let k = 0; k < parts; k++) text += pieces[rnd(pieces.length)];
      const buf = Buffer.from(text);
      const want = includesAny(buf);
      const from = rnd(buf.length + 1);
      if (scan.anchorIn(buf) >= 0 === want && scan.anchorIn(buf, from) === firstAnchor(buf, from)) agree++;
      if (want) found++;
    }
    expect(agree).toBe(20_000);
    expect(found).toBeGreaterThan(1_000); // both answers well represented
    expect(found).toBeLessThan(19_000);
  });

  it('refuses a marker with nothing to anchor on', () => {
    expect(() => new MarkerScan([Buffer.from('abc')])).toThrow(/no '"' or '\[' to anchor on/);
  });
});
