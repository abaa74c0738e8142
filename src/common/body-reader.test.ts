import { PassThrough } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { BodyReader, ClientGoneError, MAX_JSON_DEPTH, nestedDeeperThan } from './body-reader.js';
import { frameErrors } from './frame-errors.js';
import { HttpError } from './http-error.js';

const nested = (levels: number): unknown => JSON.parse('['.repeat(levels) + ']'.repeat(levels));

describe('nestedDeeperThan', () => {
  it.each<[string, unknown, number, boolean]>([
    ['a scalar', 1, 0, false],
    ['null', null, 0, false],
    ['{} at limit 0', {}, 0, true],
    ['{} at limit 1', {}, 1, false],
    ['{"a":{}} at limit 1', { a: {} }, 1, true],
    ['{"a":[1,2]} at limit 2', { a: [1, 2] }, 2, false],
    [
      'a wide flat object',
      Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i])),
      1,
      false,
    ],
    ['512 levels at the default limit', nested(512), MAX_JSON_DEPTH, false],
    ['513 levels at the default limit', nested(513), MAX_JSON_DEPTH, true],
    ['deep on a late branch', { a: 1, b: [{ c: { d: {} } }] }, 3, true],
  ])('%s → %s', (_name, value, limit, expected) => {
    expect(nestedDeeperThan(value, limit)).toBe(expected);
  });

  it('walks 100k levels without recursing', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(nestedDeeperThan(deep, MAX_JSON_DEPTH)).toBe(true);
    expect(nestedDeeperThan(deep, Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});

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
async function outcome(reader: BodyReader, req: IncomingMessage): Promise<unknown> {
  try {
    return await reader.json(req);
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return `${err.status} ${err.code} ${err.message}`;
  }
}

describe('BodyReader.json', () => {
  const reader = new BodyReader({ maxBytes: 64, maxDepth: 3 });
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

  it('a client that goes away mid-body is a ClientGoneError', async () => {
    const stream = new PassThrough();
    const req = Object.assign(stream, { headers: {} }) as unknown as IncomingMessage;
    const read = reader.raw(req);
    stream.write('{"a":');
    stream.emit('aborted');
    await expect(read).rejects.toBeInstanceOf(ClientGoneError);
  });
});
