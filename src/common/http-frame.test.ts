import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyReader } from './body-reader.js';
import { frameErrors } from './frame-errors.js';
import { closeServer, listen, sendJson } from './http.js';
import { HttpError } from './http-error.js';
import { httpFrame, type HttpFrameOptions, type RouteHandler } from './http-frame.js';
import type { Logger } from './logger.js';
import { RouteTable } from './route-table.js';

/** A domain error of another module, rendered as it is through `renderable`. */
class DomainError extends Error {
  readonly status = 409;
  readonly code = 'domain_conflict';
  readonly param = 'thing';
}

const logged: unknown[] = [];
const logger = { error: (fields: unknown) => logged.push(fields) } as unknown as Logger;
const bodies = new BodyReader({ maxBytes: 32, maxDepth: 2 });

const routes = new RouteTable<RouteHandler>()
  .add('GET', '/ok', (_req, res) => sendJson(res, 200, { ok: true }))
  .add('POST', '/echo', async (req, res) => sendJson(res, 200, { got: await bodies.json(req) }))
  .add('GET', '/items/:id', (_req, res, { id }) => sendJson(res, 200, { id }))
  .add('GET', '/refuse', () => {
    throw new HttpError(418, 'no tea', { param: 'cup', code: 'teapot', headers: { 'x-why': 'tea' } });
  })
  .add('GET', '/domain', async () => {
    await Promise.resolve();
    throw new DomainError('already there');
  })
  .add('GET', '/boom', () => {
    throw new Error('bug');
  })
  .add('GET', '/late-boom', async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('partial');
    await Promise.resolve();
    throw new Error('bug after headers');
  });

const servers: Server[] = [];
async function serve(options: Partial<HttpFrameOptions> = {}): Promise<string> {
  const server = createServer(
    httpFrame({
      routes,
      logger,
      renderable: (err) => (err instanceof DomainError ? err : undefined),
      ...options,
    }),
  );
  servers.push(server);
  return listen(server, 0, '127.0.0.1');
}
afterAll(async () => {
  await Promise.all(servers.map(closeServer));
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}
async function call(base: string, method: string, path: string, body?: string): Promise<Reply> {
  const res = await request(base + path, { method: method as 'GET', body });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text ? (JSON.parse(text) as unknown) : null };
}
const error = (message: unknown, type: string, code: string | null, param: string | null = null) => ({
  error: { message, type, param, code },
});

describe('httpFrame with the default errors', () => {
  let base: string;
  beforeAll(async () => {
    base = await serve();
  });

  it.each<[string, string, string | undefined, number, unknown, Record<string, string>?]>([
    ['GET', '/ok', undefined, 200, { ok: true }],
    ['GET', '/ok?x=1', undefined, 200, { ok: true }],
    ['GET', '/items/a%20b', undefined, 200, { id: 'a b' }],
    ['POST', '/echo', '{"a":[1]}', 200, { got: { a: [1] } }],
    [
      'POST',
      '/echo',
      '{"a":',
      400,
      error(expect.stringMatching(/^invalid JSON body: /), 'invalid_request_error', 'invalid_request'),
    ],
    [
      'POST',
      '/echo',
      '{"a":[[1]]}',
      400,
      error('request body is nested deeper than 2 levels', 'invalid_request_error', 'invalid_request'),
    ],
    [
      'POST',
      '/echo',
      JSON.stringify({ pad: 'x'.repeat(40) }),
      413,
      error('request body exceeds 32 bytes', 'invalid_request_error', 'body_too_large'),
      { connection: 'close' },
    ],
    ['GET', '/nothing', undefined, 404, error('no route for GET /nothing', 'not_found_error', 'not_found')],
    [
      'DELETE',
      '/ok',
      undefined,
      405,
      error('method DELETE not allowed on /ok', 'invalid_request_error', 'method_not_allowed'),
      { allow: 'GET' },
    ],
    [
      'GET',
      '/refuse',
      undefined,
      418,
      error('no tea', 'invalid_request_error', 'teapot', 'cup'),
      { 'x-why': 'tea' },
    ],
    [
      'GET',
      '/domain',
      undefined,
      409,
      error('already there', 'invalid_request_error', 'domain_conflict', 'thing'),
    ],
    ['GET', '/boom', undefined, 500, error('internal error', 'server_error', 'internal')],
  ])('%s %s %s → %i', async (method, path, body, status, expected, headers = {}) => {
    const reply = await call(base, method, path, body);
    expect(reply.status).toBe(status);
    expect(reply.body).toEqual(expected);
    expect(reply.headers).toMatchObject(headers);
  });

  it('logs unexpected errors once, not rendered ones', async () => {
    logged.length = 0;
    await call(base, 'GET', '/refuse');
    await call(base, 'GET', '/boom');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ method: 'GET', url: '/boom' });
  });

  it('an error after the headers went out destroys the response', async () => {
    await expect(call(base, 'GET', '/late-boom')).rejects.toThrow();
  });
});

describe('httpFrame options', () => {
  it('a server’s own wording, beforeRoute, normalizePath and noRoute', async () => {
    const base = await serve({
      errors: frameErrors({
        notFound: (method, path) =>
          new HttpError(404, `unknown route ${method} ${path}`, { code: 'unknown_route' }),
      }),
      beforeRoute: (req) => {
        if (req.headers['x-key'] === 'bad')
          throw new HttpError(401, 'bad key', { headers: { 'www-authenticate': 'Bearer' } });
      },
      normalizePath: (path) => path.toLowerCase(),
    });
    expect((await call(base, 'GET', '/OK')).body).toEqual({ ok: true });
    expect((await call(base, 'GET', '/nope')).body).toEqual(
      error('unknown route GET /nope', 'not_found_error', 'unknown_route'),
    );
    const refused = await request(`${base}/ok`, { headers: { 'x-key': 'bad' } });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    await refused.body.text();

    const passThrough = await serve({
      noRoute: (_req, res, method, path) => sendJson(res, 200, { passed: `${method} ${path}` }),
    });
    expect((await call(passThrough, 'GET', '/elsewhere?q')).body).toEqual({ passed: 'GET /elsewhere' });
    expect((await call(passThrough, 'DELETE', '/ok')).body).toEqual({ passed: 'DELETE /ok' });
  });
});

/**
 * Announces a 100-byte body but sends 5 bytes; after the error answer sends the other 95 and a second
 * request on the same connection. Resolves `reused` when that one is answered, `closed` when the
 * server closed the connection instead.
 */
function halfSentBodyThenReuse(base: string): Promise<'reused' | 'closed'> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let reply = '';
    socket.on('data', (chunk) => {
      if (reply === '') socket.write('x'.repeat(95) + 'GET /ok HTTP/1.1\r\nhost: x\r\n\r\n');
      reply += chunk.toString();
      if (reply.includes('HTTP/1.1 200')) {
        socket.destroy();
        resolve('reused');
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve('closed'));
    socket.write('POST /nothing HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nhello');
  });
}

describe('httpFrame closeUnreadBody', () => {
  it.each<[boolean, string]>([
    [true, 'closed'],
    [false, 'reused'],
  ])(
    'closeUnreadBody %s: the connection is %s after an error answer to a half-sent body',
    async (closeUnreadBody, expected) => {
      const base = await serve({ closeUnreadBody });
      expect(await halfSentBodyThenReuse(base)).toBe(expected);
    },
  );
});
