import { PassThrough } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BodyReader, ClientGoneError, type BodyAllowance } from './body-reader.js';
import { frameErrors } from './frame-errors.js';
import { HttpError } from './http-error.js';

const nested = (levels: number): unknown => JSON.parse('['.repeat(levels) + ']'.repeat(levels));

/** A request stream carrying `body` in one chunk (`content-length` only when `declared`). */
function request(body: string, declared?: number): IncomingMessage {
  const stream = new PassThrough();
  const req = Object.assign(stream, {
    headers: declared === undefined ? {} : { 'content-length': String(declared) },
  }) as unknown as IncomingMessage;
  stream.end(body);
  return req;
}

/** What `json` does with a body: the value, or `<status> <code> <message>` of the error thrown. */
async function outcome(
  reader: BodyReader,
  req: IncomingMessage,
  allowance?: BodyAllowance,
): Promise<unknown> {
  try {
    return await reader.json(req, allowance);
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return `${err.status} ${err.code} ${err.message}`;
  }
}

describe('BodyReader.json', () => {
  const reader = new BodyReader({ maxBytes: 64, maxDepth: 3, maxKeys: 2 });
  it.each<[string, string, number | undefined, unknown]>([
    ['an object', '{"a":1}', undefined, { a: 1 }],
    ['an array', '[1,2]', undefined, [1, 2]],
    ['exactly the byte limit', `"${'x'.repeat(62)}"`, undefined, 'x'.repeat(62)],
    [
      'over the byte limit',
      `"${'x'.repeat(63)}"`,
      undefined,
      '413 body_too_large request body exceeds 64 bytes',
    ],
    ['declared over the limit', '{}', 1000, '413 body_too_large request body exceeds 64 bytes'],
    ['invalid JSON', '{"a":', undefined, expect.stringMatching(/^400 invalid_request invalid JSON body: /)],
    ['an empty body', '', undefined, expect.stringMatching(/^400 invalid_request invalid JSON body: /)],
    ['at the depth limit', '[[[1]]]', undefined, [[[1]]]],
    [
      'over the depth limit',
      '[[[[1]]]]',
      undefined,
      '400 invalid_request request body is nested deeper than 3 levels',
    ],
    ['at the key limit', '{"a":{"b":1}}', undefined, { a: { b: 1 } }],
    [
      'over the key limit',
      '[{"a":1},{"b":2},{"c":3}]',
      undefined,
      '413 body_too_large request body has more than 2 JSON keys',
    ],
    ['colons in strings are no keys', '{"a:b":"c:d:e"}', undefined, { 'a:b': 'c:d:e' }],
  ])('%s', async (_name, body, declared, expected) => {
    expect(await outcome(reader, request(body, declared))).toEqual(expected);
  });

  it('uses the server’s wording of its errors', async () => {
    const worded = new BodyReader(
      { maxBytes: 4 },
      frameErrors({ bodyTooLarge: (limit) => new HttpError(413, `too big (${limit})`) }),
    );
    expect(await outcome(worded, request('"hello"'))).toBe('413 null too big (4)');
  });

  it('maxDepth Infinity skips the depth check', async () => {
    const reader = new BodyReader({ maxBytes: 1e6, maxDepth: Infinity });
    expect(await reader.json(request(JSON.stringify(nested(600))))).toEqual(nested(600));
  });

  it('counts a body against the allowance as it arrives, chunk by chunk, declared or not', async () => {
    const counted: number[] = [];
    const allowance = (room: number) => ({
      grow: (bytes: number) => (counted.push(bytes), (room -= bytes) >= 0),
    });
    const stream = new PassThrough();
    const req = Object.assign(stream, { headers: {} }) as unknown as IncomingMessage;
    const read = outcome(reader, req, allowance(10));
    stream.write('[1,2,3,');
    stream.end('4,5,6]');
    expect(await read).toBe(
      '503 overloaded server overloaded: request bodies in flight use the whole body budget',
    );
    expect(counted).toEqual([7, 6]);
    // a declared body too: what admission reserved for it is the allowance's to net out
    counted.length = 0;
    expect(await outcome(reader, request('[1]', 3), allowance(3))).toEqual([1]);
    expect(counted).toEqual([3]);
  });

  it('a client that goes away mid-body is a ClientGoneError', async () => {
    const stream = new PassThrough();
    const req = Object.assign(stream, { headers: {} }) as unknown as IncomingMessage;
    const read = reader.raw(req);
    stream.write('{"a":');
    stream.emit('aborted');
    await expect(read).rejects.toBeInstanceOf(ClientGoneError);
  });
});

describe('BodyReader minimum upload rate', () => {
  afterEach(() => vi.useRealTimers());
  const rate = { bytesPerSecond: 10, windowMs: 1000 }; // 10 bytes per window
  const reader = new BodyReader({ maxBytes: 1000, minUploadRate: rate });

  /** A declared 100-byte body (JSON `1` after spaces) whose chunks are written one window apart; the outcome. */
  async function upload(chunks: string[]): Promise<unknown> {
    vi.useFakeTimers();
    const stream = new PassThrough();
    const req = Object.assign(stream, { headers: { 'content-length': '100' } }) as unknown as IncomingMessage;
    const read = outcome(reader, req);
    for (const chunk of chunks) {
      stream.write(chunk);
      await vi.advanceTimersByTimeAsync(rate.windowMs);
    }
    stream.end(' '.repeat(99 - chunks.join('').length) + '1');
    return read;
  }

  const tooSlow = '408 upload_too_slow request body arrived slower than 10 bytes/s over 1000 ms';
  const spaces = (n: number): string => ' '.repeat(n);
  it.each<[string, string[], unknown]>([
    ['every window at the rate', [spaces(10), spaces(10), spaces(10)], 1],
    ['a window under the rate', [spaces(10), spaces(9)], tooSlow],
    ['a trickle from the start', [spaces(1)], tooSlow],
  ])('%s', async (_name, chunks, expected) => {
    expect(await upload(chunks)).toEqual(expected);
  });

  it('arms no timer for a body complete in its first chunk', async () => {
    vi.useFakeTimers();
    const read = reader.raw(request('[1]', 3));
    expect(vi.getTimerCount()).toBe(0);
    expect((await read).toString()).toBe('[1]');
  });
});
