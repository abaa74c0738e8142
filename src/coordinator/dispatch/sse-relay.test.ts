import { afterEach, describe, expect, it, vi } from 'vitest';
import { MarkerScan } from './marker-scan.js';
import { rewriteResponseObject, SseRelay, withoutTrailingNullKv } from './sse-relay.js';

const chunk = (s: string): Buffer => Buffer.from(s);
const frame = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
const tok = (t: string) => frame({ id: 'x', choices: [{ index: 0, delta: { content: t } }] });

function run(chunks: string[], rw = { cachedTokens: null as number | null, stripTokenIds: true }) {
  const relay = new SseRelay(rw);
  const out: Buffer[] = [];
  const inputs = chunks.map(chunk);
  const passedThrough: boolean[] = [];
  for (const c of inputs) {
    const o = relay.push(c);
    passedThrough.push(o === c);
    if (o) out.push(o);
  }
  return { text: Buffer.concat(out).toString(), relay, passedThrough };
}

describe('SseRelay', () => {
  it.each<
    [string, string[], string, Partial<{ sawDone: boolean; upstreamError: string | null; pending: number }>]
  >([
    ['whole frames pass through untouched', [tok('a'), tok('b')], tok('a') + tok('b'), { sawDone: false }],
    ['[DONE] is swallowed and noted', [tok('a') + 'data: [DONE]\n\n'], tok('a'), { sawDone: true }],
    [
      'frames split across chunks are reassembled',
      [tok('a').slice(0, 7), tok('a').slice(7) + tok('b').slice(0, 3), tok('b').slice(3)],
      tok('a') + tok('b'),
      {},
    ],
    [
      'internal fields are stripped',
      [frame({ id: 'x', kv_transfer_params: { a: 1 }, _motor_x: 1, choices: [] })],
      frame({ id: 'x', choices: [] }),
      {},
    ],
    [
      'token ids are stripped',
      [frame({ id: 'x', prompt_token_ids: [1], choices: [{ index: 0, token_ids: [2], text: 'a' }] })],
      frame({ id: 'x', choices: [{ index: 0, text: 'a' }] }),
      {},
    ],
    [
      'an engine error frame is forwarded and noted',
      [frame({ error: { message: 'boom' } })],
      frame({ error: { message: 'boom' } }),
      { upstreamError: 'boom' },
    ],
    ['an incomplete tail is held back', [tok('a') + 'data: {"id"'], tok('a'), { pending: 11 }],
    // Regression: an extra newline after a frame that needs work made the frame loop spin forever.
    [
      'extra blank line after [DONE]',
      [tok('a') + 'data: [DONE]\n\n\n'],
      tok('a'),
      { sawDone: true, pending: 0 },
    ],
    [
      'extra blank lines around a frame that needs a rewrite',
      [frame({ id: 'x', _motor_x: 1 }) + '\n', '\n' + frame({ id: 'y', kv_transfer_params: {} }) + '\n'],
      frame({ id: 'x' }) + frame({ id: 'y' }),
      { pending: 0 },
    ],
    ['[DONE] alone', ['data: [DONE]\n\n'], '', { sawDone: true }],
    [
      'several frames then [DONE] in one chunk',
      [tok('a') + tok('b') + tok('c') + 'data: [DONE]\n\n'],
      tok('a') + tok('b') + tok('c'),
      { sawDone: true, pending: 0 },
    ],
    [
      'a frame needing a rewrite before [DONE] in one chunk',
      [tok('a') + frame({ id: 'x', _motor_x: 1 }) + 'data: [DONE]\n\n'],
      tok('a') + frame({ id: 'x' }),
      { sawDone: true },
    ],
    [
      '[DONE] after a blank line is still recognised',
      [tok('a') + '\ndata: [DONE]\n\n'],
      tok('a'),
      { sawDone: true },
    ],
    [
      'frames then [DONE] across two chunks',
      [tok('a') + tok('b').slice(0, 5), tok('b').slice(5) + 'data: [DONE]\n\n'],
      tok('a') + tok('b'),
      { sawDone: true, pending: 0 },
    ],
    [
      '[DONE] then the start of another frame',
      [tok('a') + 'data: [DONE]\n\ndata: {"x"'],
      tok('a'),
      { sawDone: true, pending: 10 },
    ],
  ])('%s', (_name, chunks, expected, flags) => {
    const { text, relay } = run(chunks);
    expect(text).toBe(expected);
    if (flags.sawDone !== undefined) expect(relay.sawDone).toBe(flags.sawDone);
    if (flags.upstreamError !== undefined) expect(relay.upstreamError).toBe(flags.upstreamError);
    if (flags.pending !== undefined) expect(relay.pendingBytes).toBe(flags.pending);
  });

  describe('scans each byte for markers once', () => {
    afterEach(() => vi.restoreAllMocks());
    const answer = [tok('a'), tok('b'), frame({ id: 'x', choices: [], usage: { prompt_tokens: 1 } })];
    it.each<[string, string[]]>([
      // (the whole-answer chunk was scanned three times: as a chunk, as frames, as the frames before [DONE])
      ['a whole answer in one chunk', [answer.join('') + 'data: [DONE]\n\n']],
      ['a frame per chunk', [...answer, 'data: [DONE]\n\n']],
      [
        'frames cut across chunks',
        [answer.join('').slice(0, 40), answer.join('').slice(40) + 'data: [DONE]\n\n'],
      ],
    ])('%s', (_name, chunks) => {
      const test = vi.spyOn(MarkerScan.prototype, 'test');
      const { text } = run(chunks);
      expect(text).toBe(answer.join(''));
      const scanned = test.mock.calls.reduce((sum, [buf]) => sum + buf.length, 0);
      expect(scanned).toBeLessThanOrEqual(answer.join('').length);
    });
  });

  it('merges cached tokens into the usage chunk only', () => {
    const usage = frame({
      id: 'x',
      choices: [],
      usage: { prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 0 } },
    });
    const { text, passedThrough } = run([tok('a'), usage], { cachedTokens: 8, stripTokenIds: true });
    expect(passedThrough).toEqual([true, false]);
    expect(text).toBe(
      tok('a') +
        frame({
          id: 'x',
          choices: [],
          usage: { prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 8 } },
        }),
    );
  });

  it('keeps token ids when the client asked for them', () => {
    const f = frame({ id: 'x', choices: [{ index: 0, token_ids: [2] }] });
    expect(run([f], { cachedTokens: null, stripTokenIds: false }).passedThrough).toEqual([true]);
  });
});

describe('withoutTrailingNullKv', () => {
  const rw = { cachedTokens: null, stripTokenIds: true };
  it.each([
    ['vLLM layout', '{"id":"x","choices":[],"kv_transfer_params":null}', '{"id":"x","choices":[]}'],
    ['trailing newline', '{"a":1,"kv_transfer_params":null}\n', '{"a":1}'],
    ['not last', '{"kv_transfer_params":null,"a":1}', null],
    ['not null', '{"a":1,"kv_transfer_params":{"x":1}}', null],
    ['inside a string', '{"a":"\\",\\"kv_transfer_params\\":null}"}', null],
    ['nested object, not last at top', '{"a":{"b":1,"kv_transfer_params":null},"c":2}', null],
    ['too short', '}', null],
  ])('%s', (_name, input, expected) => {
    const out = withoutTrailingNullKv(Buffer.from(input));
    expect(out === null ? null : out.toString()).toBe(expected);
    if (out !== null) {
      // same result as parsing, rewriting and re-serialising
      const obj = JSON.parse(input) as Record<string, unknown>;
      rewriteResponseObject(obj, rw);
      expect(JSON.parse(out.toString())).toEqual(obj);
    }
  });
});
