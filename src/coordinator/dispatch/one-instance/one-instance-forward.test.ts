import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../../../common/http.js';
import { createLogger } from '../../../common/logger.js';
import { validateCoordinatorConfig } from '../../../config/coordinator-config.js';
import { startCoordinator } from '../../coordinator.js';

/**
 * One-instance routes through an in-process coordinator on scripted engines: which role answers,
 * the bytes both ways, retries before the answer, and engine errors relayed.
 */
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Engine {
  url: string;
  /** Each POST: path and raw body. */
  posts: [string, string][];
}

/** An engine answering its POSTs from `replies` in order (the last one repeats); GETs list model `m`. */
async function engine(replies: [number, string][]): Promise<Engine> {
  const posts: [string, string][] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let [status, body] = [200, JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] })];
      if (req.method === 'POST') {
        posts.push([req.url ?? '', Buffer.concat(chunks).toString()]);
        [status, body] = replies[Math.min(posts.length, replies.length) - 1]!;
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  const url = await listen(server, 0, '127.0.0.1');
  closers.push(() => closeServer(server));
  return { url, posts };
}

async function coordinator(
  instances: { id: string; url: string; role: string; models?: string[] }[],
  oneInstanceRoles?: string[],
): Promise<string> {
  const config = validateCoordinatorConfig({
    server: { port: 0 },
    instances: instances.map((i) => ({ models: ['m'], mode: 'direct', ...i })),
    health: { intervalMs: 0 },
    retry: { maxAttempts: 2, baseDelayMs: 0, maxDelayMs: 0 },
    dispatch: oneInstanceRoles ? { oneInstanceRoles } : {},
    observability: { accessLog: false, metrics: false, dashboard: false },
    management: { port: null },
  });
  const running = await startCoordinator(config, createLogger('one-instance-test', 'silent'));
  closers.push(() => running.close());
  return running.url;
}

const OK = '{"data" : [ 1 ],  "object":"list"}';
const SENT = '{"model":"m",   "input": "hi",\n"unknown_engine_field": {"x": [1, 2]}}';

async function send(url: string, path = '/v1/embeddings', body = SENT) {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return { status: r.status, text: await r.text() };
}

describe('one-instance routes', () => {
  it.each<
    [string, [number, string][], [number, string][], string[] | undefined, number, string, number, number]
  >([
    // name, union replies, decode replies, roles, status, body, union posts, decode posts
    ['the union answers first, bytes unchanged', [[200, OK]], [[200, '{}']], undefined, 200, OK, 1, 0],
    [
      'a union 503 is retried on the decode',
      [[503, '{"error":{"message":"busy"}}']],
      [[200, OK]],
      undefined,
      200,
      OK,
      1,
      1,
    ],
    ['a 500 is retried too', [[500, 'boom']], [[200, OK]], undefined, 200, OK, 1, 1],
    [
      'an engine 4xx is relayed, not retried',
      [[422, '{"detail":"bad input"}']],
      [[200, OK]],
      undefined,
      422,
      '{"detail":"bad input"}',
      1,
      0,
    ],
    ['dispatch.oneInstanceRoles: decode only', [[200, '{}']], [[200, OK]], ['decode'], 200, OK, 0, 1],
  ])('%s', async (_n, unionReplies, decodeReplies, roles, status, body, unionPosts, decodePosts) => {
    const [u, d, p] = await Promise.all([engine(unionReplies), engine(decodeReplies), engine([[200, '{}']])]);
    const url = await coordinator(
      [
        { id: 'U', url: u.url, role: 'union' },
        { id: 'D', url: d.url, role: 'decode' },
        { id: 'P', url: p.url, role: 'prefill' },
      ],
      roles,
    );
    const r = await send(url);
    expect(r).toEqual({ status, text: body });
    expect(u.posts.length).toBe(unionPosts);
    expect(d.posts.length).toBe(decodePosts);
    expect(p.posts).toEqual([]); // never the prefill by default
    for (const [path, sent] of [...u.posts, ...d.posts])
      expect([path, sent]).toEqual(['/v1/embeddings', SENT]);
  });

  it.each<[string, string[][], number]>([
    ['one model in the fleet', [['m'], ['m']], 200],
    ['several models', [['m'], ['n']], 400],
  ])('no model in the body, %s → %d', async (_n, models, status) => {
    const [a, b] = await Promise.all([engine([[200, OK]]), engine([[200, OK]])]);
    const url = await coordinator([
      { id: 'A', url: a.url, role: 'union', models: models[0] },
      { id: 'B', url: b.url, role: 'union', models: models[1] },
    ]);
    const r = await send(url, '/tokenize', '{"prompt":"hi"}');
    expect(r.status).toBe(status);
    if (status === 400) expect(JSON.parse(r.text).error.param).toBe('model');
  });
});
