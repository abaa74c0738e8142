import { createServer, type Server } from 'node:http';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from './http.js';
import { HttpError, renderError, type RenderableError } from './http-error.js';

/** What each path renders: an error and, optionally, extra headers. */
const CASES: Record<string, { err: RenderableError; extra?: Record<string, string> }> = {
  '/plain': { err: new HttpError(404, 'gone') },
  '/own': { err: new HttpError(413, 'big', { headers: { connection: 'close', 'x-a': '1' } }) },
  '/extra': {
    err: { status: 401, message: 'who', code: 'unauthorized' },
    extra: { 'www-authenticate': 'Bearer', 'x-b': '2' },
  },
  '/both': { err: new HttpError(429, 'slow', { headers: { 'x-a': '1' } }), extra: { 'retry-after': '3' } },
};

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    const c = CASES[req.url ?? ''];
    if (c) renderError(res, c.err, c.extra);
  });
  base = await listen(server, 0, '127.0.0.1');
});
afterAll(() => closeServer(server));

const NODE_ADDED = new Set(['date', 'keep-alive', 'connection']);

/** Status, header names in wire order (without those Node adds itself) and body of one path. */
async function rendered(path: string): Promise<{ status: number; names: string[]; body: unknown }> {
  const res = await request(`${base}${path}`);
  const names = Object.keys(res.headers).filter((name) => !NODE_ADDED.has(name));
  return { status: res.statusCode, names, body: await res.body.json() };
}

describe('renderError', () => {
  it.each([
    ['/plain', 404, ['content-type', 'content-length']],
    // the error's own headers, then the extra ones, always ahead of content-type / content-length
    ['/own', 413, ['x-a', 'content-type', 'content-length']],
    ['/extra', 401, ['www-authenticate', 'x-b', 'content-type', 'content-length']],
    ['/both', 429, ['x-a', 'retry-after', 'content-type', 'content-length']],
  ])('%s → %i with headers %j', async (path, status, names) => {
    const got = await rendered(path);
    expect(got.status).toBe(status);
    expect(got.names).toEqual(names);
  });

  it('renders the OpenAI error body, the type derived from the status', async () => {
    expect((await rendered('/extra')).body).toEqual({
      error: { message: 'who', type: 'authentication_error', param: null, code: 'unauthorized' },
    });
  });
});
