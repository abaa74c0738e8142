import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { recorded } from '../../engine-proxy/testing/index.js';
import { startSimulator } from '../../simulator/server.js';
import { chatBody, post } from '../../simulator/testing/index.js';
import { startCoordinator } from '../coordinator.js';
import { applyCacheSalt, tenantSalter } from './tenant-salt.js';

/** Issue 15 finding 8: per-tenant `cache_salt` so one API key cannot probe another's cached prompts. */

const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;
const SECRET = 'deployment-secret';

describe('tenantSalter', () => {
  it.each([
    ['off', 'k1', {}, 'k2', {}, 'none'],
    ['api-key', 'k1', {}, 'k1', {}, 'same'],
    ['api-key', 'k1', {}, 'k2', {}, 'different'],
    ['header:x-tenant', 'k1', { 'x-tenant': 't1' }, 'k2', { 'x-tenant': 't1' }, 'same'],
    ['header:X-Tenant', 'k1', { 'x-tenant': 't1' }, 'k1', { 'x-tenant': 't2' }, 'different'],
    ['header:x-tenant', 'k1', {}, 'k1', { 'x-tenant': '' }, 'different'],
  ] as const)('%s: (%s, %o) vs (%s, %o) → %s salt', (isolation, k1, h1, k2, h2, expected) => {
    const salter = tenantSalter({ isolation, secret: SECRET });
    const a = salter(req(h1), k1);
    const b = salter(req(h2), k2);
    if (expected === 'none') return expect([a, b]).toEqual([undefined, undefined]);
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 bits, base64url, as vLLM recommends
    expect(a).not.toContain(k1);
    expect(a === b).toBe(expected === 'same');
  });

  it('replicas with one secret agree; without a secret each process salts differently', () => {
    const shared = [1, 2].map(() => tenantSalter({ isolation: 'api-key', secret: SECRET })(req(), 'k'));
    expect(shared[0]).toBe(shared[1]);
    const random = [1, 2].map(() => tenantSalter({ isolation: 'api-key' })(req(), 'k'));
    expect(random[0]).not.toBe(random[1]);
  });

  it('replaces a client-sent cache_salt when on, and leaves it alone when off', () => {
    const body: Record<string, unknown> = { cache_salt: 'guessed' };
    applyCacheSalt(body, undefined);
    expect(body.cache_salt).toBe('guessed');
    applyCacheSalt(body, 'tenant');
    expect(body.cache_salt).toBe('tenant');
  });
});

describe('server.tenantIsolation config', () => {
  it.each([
    [{ tenantIsolation: 'api-key' }, {}, /'api-key' needs server.apiKeys/],
    [{ tenantIsolation: 'tenant' }, {}, /expected 'off', 'api-key' or 'header:<name>'/],
    [{ tenantSaltSecretEnv: 'SALT' }, {}, /environment variable SALT is unset/],
  ])('%o refuses to start', (server, env, message) => {
    expect(() => validateCoordinatorConfig({ server }, env)).toThrow(message);
  });

  it('accepts header mode with a secret from the environment', () => {
    const config = validateCoordinatorConfig(
      { server: { tenantIsolation: 'header:x-tenant', tenantSaltSecretEnv: 'SALT' } },
      { SALT: 's' },
    );
    expect(config.server.tenantIsolation).toBe('header:x-tenant');
  });
});

describe('coordinator sets cache_salt on the engine request', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  const quiet = createLogger('tenant-salt-test', 'silent');
  async function sim(role: 'union' | 'prefill' | 'decode'): Promise<string> {
    const running = await startSimulator({ role }, quiet);
    closers.push(() => running.close());
    return running.url;
  }

  async function saltsSeen(tenantIsolation: string, calls: Array<[string, Record<string, unknown>]>) {
    const engine = await sim('union');
    const config = validateCoordinatorConfig(
      {
        server: { port: 0, apiKeys: ['key-a', 'key-b'], tenantIsolation },
        instances: [{ url: engine, role: 'union', mode: 'direct' }],
      },
      {},
    );
    const running = await startCoordinator(config, quiet);
    closers.push(() => running.close());
    for (const [key, extra] of calls) {
      const res = await post(running.url, '/v1/chat/completions', chatBody('same prompt', extra), {
        authorization: `Bearer ${key}`,
      });
      expect(res.status).toBe(200);
    }
    const seen = (await recorded(engine)).filter((r) => r.path === '/v1/chat/completions');
    expect(seen).toHaveLength(calls.length);
    for (const r of seen) expect(JSON.stringify(r)).not.toMatch(/key-[ab]/);
    return seen.map((r) => r.body.cache_salt as unknown);
  }

  it('api-key: two keys, same prompt → two salts; same key → same salt; a client salt is overridden', async () => {
    const [a1, b, a2] = await saltsSeen('api-key', [
      ['key-a', {}],
      ['key-b', {}],
      ['key-a', { cache_salt: 'guessed' }],
    ]);
    expect(a1).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(b).not.toBe(a1);
    expect(a2).toBe(a1);
  });

  it('off: no salt is added, a client-sent one passes through', async () => {
    const salts = await saltsSeen('off', [
      ['key-a', {}],
      ['key-b', { cache_salt: 'own' }],
    ]);
    expect(salts).toEqual([undefined, 'own']);
  });

  it('P/D: the prefill and the decode leg carry the same tenant salt', async () => {
    const [p, d] = [await sim('prefill'), await sim('decode')];
    const nixl = { kv_connector: 'NixlConnector' };
    const config = validateCoordinatorConfig(
      {
        server: { port: 0, apiKeys: ['key-a'], tenantIsolation: 'api-key' },
        instances: [
          { url: p, role: 'prefill', mode: 'direct', kvTransferConfig: nixl },
          { url: d, role: 'decode', mode: 'direct', kvTransferConfig: nixl },
        ],
      },
      {},
    );
    const running = await startCoordinator(config, quiet);
    closers.push(() => running.close());
    const res = await post(running.url, '/v1/chat/completions', chatBody('same prompt'), {
      authorization: 'Bearer key-a',
    });
    expect(res.status).toBe(200);
    const legs = [...(await recorded(p)), ...(await recorded(d))].filter(
      (r) => r.path === '/v1/chat/completions',
    );
    expect(legs).toHaveLength(2);
    const [prefillSalt, decodeSalt] = legs.map((r) => r.body.cache_salt as unknown);
    expect(prefillSalt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(decodeSalt).toBe(prefillSalt);
  });
});
