import { afterEach, describe, expect, it, vi } from 'vitest';
import { MarkerScan } from './marker-scan.js';
import { type ResponseRewrite, rewriteResponseObject, SseRelay, withoutTrailingNullKv } from './sse-relay.js';

const chunk = (s: string): Buffer => Buffer.from(s);
const frame = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
const tok = (t: string) => frame({ id: 'x', choices: [{ index: 0, delta: { content: t } }] });

function run(chunks: string[], rw: ResponseRewrite = { cachedTokens: null, stripTokenIds: true }) {
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
    const usage = frame({ id: 'x', choices: [], usage: { prompt_tokens: 1 } });
    const answer = [tok('a'), tok('b'), usage];
    const SINGLE = { cachedTokens: null, stripTokenIds: true };
    // P/D: the usage frame takes the prefill's cached tokens, so the chunk goes frame by frame
    const PD = { cachedTokens: 8, stripTokenIds: true };
    const pdOut =
      tok('a') +
      tok('b') +
      frame({
        id: 'x',
        choices: [],
        usage: { prompt_tokens: 1, prompt_tokens_details: { cached_tokens: 8 } },
      });
    const whole = answer.join('');
    it.each<[string, string[], ResponseRewrite, string]>([
      // (the whole-answer chunk was scanned three times: as a chunk, as frames, as the frames before [DONE])
      ['a whole answer in one chunk', [whole + 'data: [DONE]\n\n'], SINGLE, whole],
      ['a frame per chunk', [...answer, 'data: [DONE]\n\n'], SINGLE, whole],
      ['frames cut across chunks', [whole.slice(0, 40), whole.slice(40) + 'data: [DONE]\n\n'], SINGLE, whole],
      // (a chunk with a frame to rewrite was scanned twice: as a chunk, then frame by frame)
      ['P/D: a whole answer in one chunk', [whole + 'data: [DONE]\n\n'], PD, pdOut],
      ['P/D: a whole answer without [DONE]', [whole], PD, pdOut],
      [
        'P/D: frames cut across chunks',
        [whole.slice(0, 40), whole.slice(40) + 'data: [DONE]\n\n'],
        PD,
        pdOut,
      ],
      [
        'P/D: two frames to rewrite and a blank line before [DONE]',
        [frame({ id: 'x', _motor_x: 1 }) + whole + '\ndata: [DONE]\n\n'],
        PD,
        frame({ id: 'x' }) + pdOut,
      ],
    ])('%s', (_name, chunks, rw, want) => {
      const anchorIn = vi.spyOn(MarkerScan.prototype, 'anchorIn');
      const { text } = run(chunks, rw);
      expect(text).toBe(want);
      // a scan stops at the marker it finds
      const scanned = anchorIn.mock.calls.reduce((sum, [buf, from = 0], k) => {
        const found = anchorIn.mock.results[k]!.value as number;
        return sum + Math.max(0, (found < 0 ? buf.length : found + 1) - from);
      }, 0);
      expect(scanned).toBeLessThanOrEqual(chunks.join('').length);
    });
  });

  describe('a chunk of frames relays as its frames would one by one', () => {
    const usage = frame({ id: 'x', choices: [], usage: { prompt_tokens: 4, prompt_tokens_details: null } });
    const kv = frame({ id: 'x', choices: [], kv_transfer_params: { a: 1 } });
    const motor = frame({ id: 'x', _motor_y: 2, choices: [] });
    const ids = frame({ id: 'x', choices: [{ index: 0, text: 't', token_ids: [3] }] });
    const error = frame({ error: { message: 'boom' } });
    const recomputed = frame({
      id: 'x',
      choices: [{ index: 0, finish_reason: 'stop', stop_reason: 'recomputed' }],
    });
    const done = 'data: [DONE]\n\n';
    const rws = [
      { cachedTokens: null, stripTokenIds: true },
      { cachedTokens: 8, stripTokenIds: true },
      { cachedTokens: 8, stripTokenIds: false },
    ];
    it.each<[string, string[]]>([
      ['no marker', [tok('a'), tok('b'), tok('c')]],
      ['usage last, then [DONE]', [tok('a'), tok('b'), usage, done]],
      ['marks in a row', [kv, motor, ids, usage, done]],
      ['marks apart', [tok('a'), kv, tok('b'), tok('c'), ids, tok('d'), usage, tok('e'), done]],
      ['a mark first and last', [motor, tok('a'), tok('b'), usage]],
      ['an error frame among rewrites', [tok('a'), ids, error, tok('b'), usage, done]],
      ['a recomputed end', [tok('a'), usage, recomputed, done]],
      ['frames after [DONE]', [tok('a'), done, usage, tok('b')]],
      ['[DONE] as text', [tok('data: [DONE]'), tok('a'), usage]],
    ])('%s', (_name, frames) => {
      for (const rw of rws) {
        const one = run(frames, rw);
        const joined = frames.join('');
        // one chunk, and every cut into two
        for (let cut = 0; cut < joined.length; cut += cut === 0 ? 1 : 7) {
          const got = run(cut === 0 ? [joined] : [joined.slice(0, cut), joined.slice(cut)], rw);
          expect(got.text, `cut ${cut}, ${JSON.stringify(rw)}`).toBe(one.text);
          for (const flag of ['sawDone', 'upstreamError', 'recomputed', 'pendingBytes'] as const)
            expect(got.relay[flag], flag).toBe(one.relay[flag]);
        }
      }
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
