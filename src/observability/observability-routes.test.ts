import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Observability } from './observability.js';
import { createObservabilityRoutes } from './observability-routes.js';

/** The routes behind a real loopback server, with and without `observability.requireApiKey`. */
async function serve(apiKeys?: string[]): Promise<{ url: string; server: Server }> {
  const obs = Observability.create(
    pino({ level: 'silent' }),
    { instances: () => [] },
    { defaultMetrics: false },
  );
  const routes = createObservabilityRoutes(
    obs,
    { instances: () => [] },
    { metrics: true, dashboard: true, apiKeys },
  );
  const server = createServer((req, res) => {
    if (!routes(req, res, req.method ?? 'GET', req.url ?? '/')) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('observability routes', () => {
  let open: { url: string; server: Server };
  let keyed: { url: string; server: Server };
  beforeAll(async () => {
    [open, keyed] = await Promise.all([serve(), serve(['k1', 'k2'])]);
  });
  afterAll(() => {
    open.server.close();
    keyed.server.close();
  });

  it.each<[string, 'open' | 'keyed', string, string | null, number]>([
    ['metrics, no key required', 'open', '/metrics', null, 200],
    ['state, no key required', 'open', '/dashboard/api/state', null, 200],
    ['metrics without a key', 'keyed', '/metrics', null, 401],
    ['metrics with a wrong key', 'keyed', '/metrics', 'nope', 401],
    ['metrics with a key', 'keyed', '/metrics', 'k2', 200],
    ['state without a key', 'keyed', '/dashboard/api/state', null, 401],
    ['state with a key', 'keyed', '/dashboard/api/state', 'k1', 200],
    // the page holds no data; it sends the key from its URL fragment when it fetches the state
    ['page without a key', 'keyed', '/dashboard', null, 200],
  ])('%s', async (_name, which, path, key, status) => {
    const res = await fetch((which === 'open' ? open : keyed).url + path, {
      headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    expect(res.status).toBe(status);
    if (status === 401) {
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(await res.json()).toMatchObject({
        error: { code: 'unauthorized', type: 'authentication_error' },
      });
    } else {
      await res.arrayBuffer();
    }
  });
});
