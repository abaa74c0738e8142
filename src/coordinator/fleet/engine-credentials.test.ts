import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../../common/http.js';
import { createLogger } from '../../common/logger.js';
import { errorForEngineStatus } from '../../common/motor-error.js';
import { ConfigError, validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { registrationFromConfig } from './registry-instance-source.js';
import { legOutcome } from '../scheduling-bridge/scheduling-adapter.js';
import { startCoordinator, type RunningCoordinator } from '../coordinator.js';
import { Upstreams } from './upstream.js';
import { engineAuthRefusal, type EngineKeys } from '../../../test/helpers/engine-auth-rules.js';
import { loadEngineFixture } from '../../../test/fixtures/engines/load.js';

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
}

/** A loopback engine that enforces the engine's own auth rules (fixtures README facts 21–22). */
async function fakeEngine(
  engine: 'vllm' | 'sglang',
  keys: EngineKeys,
): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '/';
      seen.push({ path, headers: req.headers });
      const refusal = engineAuthRefusal(engine, keys, path, req.headers.authorization);
      if (refusal) {
        res.writeHead(refusal.status, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(refusal.body));
      }
      if (path === '/metrics') return res.end(loadEngineFixture('sglang/server/metrics.prom').body as string);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          model: 'm',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  const url = await listen(server, 0, '127.0.0.1');
  return { url, seen, close: () => closeServer(server) };
}

describe('direct-mode engine credentials in the config', () => {
  const env = { ENGINE_KEY: 'from-env', EMPTY: '' };
  const instance = (over: Record<string, unknown>) => ({
    id: 'e0',
    url: 'http://127.0.0.1:30000',
    role: 'union',
    mode: 'direct',
    ...over,
  });

  it.each([
    [
      'apiKeyEnv reads the environment',
      { apiKeyEnv: 'ENGINE_KEY' },
      { apiKey: 'from-env', adminApiKey: null },
    ],
    ['apiKey in the file', { apiKey: 'literal' }, { apiKey: 'literal', adminApiKey: null }],
    [
      'adminApiKeyEnv beside apiKey',
      { apiKey: 'k', adminApiKeyEnv: 'ENGINE_KEY' },
      { apiKey: 'k', adminApiKey: 'from-env' },
    ],
    ['none', {}, undefined],
  ])('%s', (_name, over, expected) => {
    const config = validateCoordinatorConfig({ instances: [instance(over)] }, env);
    expect(config.engineCredentials.get('e0')).toEqual(expected);
    // the secret never rides on the instance (registry, management API, dashboard)
    expect(JSON.stringify(config.instances)).not.toMatch(/from-env|literal|apiKey/);
    expect(JSON.stringify(registrationFromConfig(config.instances[0]!))).not.toMatch(/from-env|literal/);
  });

  it.each([
    [
      'an unset variable',
      { apiKeyEnv: 'NOT_SET' },
      'instances[0].apiKeyEnv: environment variable NOT_SET is not set',
    ],
    [
      'an empty variable',
      { adminApiKeyEnv: 'EMPTY' },
      'instances[0].adminApiKeyEnv: environment variable EMPTY is not set',
    ],
    [
      'both forms',
      { apiKey: 'a', apiKeyEnv: 'ENGINE_KEY' },
      'instances[0].apiKey: set apiKey or apiKeyEnv, not both',
    ],
    ['a proxy instance', { mode: 'proxy', apiKey: 'a' }, '--engine-api-key'],
  ])('refuses %s with one clear line', (_name, over, message) => {
    let err: unknown;
    try {
      validateCoordinatorConfig({ instances: [instance(over)] }, env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.join('\n')).toContain(message);
    expect((err as ConfigError).message).not.toContain('from-env');
  });
});

describe('an engine 401/403 is a Motor configuration error, not the client’s', () => {
  it.each([401, 403])(
    '%s → engine_error naming the instance and "engine API key", retryable, a failure',
    (status) => {
      const err = errorForEngineStatus('p0', 'prefill', {
        status,
        body: Buffer.from(JSON.stringify({ error: 'Unauthorized' })),
        contentType: 'application/json',
      });
      expect(err.code).toBe('engine_error');
      expect(err.retryable).toBe(true);
      expect(err.message).toMatch(
        /^prefill engine p0 answered 40[13]: the engine API key is missing or wrong/,
      );
      expect(legOutcome('p0', err)).toBe('failure');
    },
  );
});

describe('Upstreams sends each instance its own key', () => {
  let engine: Awaited<ReturnType<typeof fakeEngine>>;
  beforeAll(async () => {
    engine = await fakeEngine('sglang', { apiKey: 'k1', adminApiKey: 'adm' });
  });
  afterAll(() => engine.close());

  it('api key on calls, admin key on admin calls, nothing for an instance without keys', async () => {
    const upstreams = new Upstreams({
      connectionsPerInstance: 2,
      keepAliveMs: 1000,
      connectMs: 1000,
      credentials: new Map([['s0', { apiKey: 'k1', adminApiKey: 'adm' }]]),
    });
    try {
      const s0 = { id: 's0', url: engine.url };
      const gen = await upstreams.request(s0, { path: '/generate', body: '{}' });
      await gen.body.dump();
      expect(gen.statusCode).toBe(200);
      const abort = await upstreams.postJson(s0, '/abort_request', '{"rid":"r"}', 1000, { admin: true });
      expect(abort).toMatchObject({ status: 200 });
      const other = await upstreams.request(
        { id: 'other', url: engine.url },
        { path: '/generate', body: '{}' },
      );
      await other.body.dump();
      expect(other.statusCode).toBe(401);
      expect(engine.seen.map((s) => [s.path, s.headers.authorization])).toEqual([
        ['/generate', 'Bearer k1'],
        ['/abort_request', 'Bearer adm'],
        ['/generate', undefined],
      ]);
    } finally {
      await upstreams.close();
    }
  });
});

describe('coordinator direct mode against an engine with --api-key', () => {
  let good: Awaited<ReturnType<typeof fakeEngine>>;
  let other: Awaited<ReturnType<typeof fakeEngine>>;
  let coordinator: RunningCoordinator | null = null;
  beforeAll(async () => {
    good = await fakeEngine('vllm', { apiKey: 'right' });
    other = await fakeEngine('vllm', { apiKey: 'other-right' });
  });
  afterAll(async () => {
    await coordinator?.close();
    await Promise.all([good.close(), other.close()]);
  });

  async function chat(key: string): Promise<{ status: number; text: string }> {
    await coordinator?.close();
    const config = validateCoordinatorConfig(
      {
        server: { port: 0, instanceErrorsToClients: true }, // the hint is what this test reads
        health: { intervalMs: 0 },
        instances: [{ id: 'v0', url: good.url, role: 'union', mode: 'direct', apiKeyEnv: 'V0_KEY' }],
      },
      { V0_KEY: key },
    );
    coordinator = await startCoordinator(config, createLogger('test', 'silent'));
    const res = await fetch(`${coordinator.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    return { status: res.status, text: await res.text() };
  }

  it('sends the key; a wrong key is a 502 naming the engine API key, never a 401 to the client', async () => {
    expect((await chat('right')).status).toBe(200);
    expect(good.seen.find((s) => s.path === '/v1/chat/completions')?.headers.authorization).toBe(
      'Bearer right',
    );
    const wrong = await chat('bad-secret-123');
    expect(wrong.status).toBe(502);
    expect(wrong.text).toMatch(/engine v0 answered 401: the engine API key is missing or wrong/);
    expect(wrong.text).not.toContain('bad-secret-123');
  });

  it('a misconfigured instance is retried elsewhere and its breaker opens: no retry storm', async () => {
    await coordinator?.close();
    const config = validateCoordinatorConfig(
      {
        server: { port: 0 },
        health: { intervalMs: 0 },
        scheduling: { policy: 'round-robin', circuitBreaker: { failureThreshold: 2, openMs: 60_000 } },
        instances: [
          { id: 'bad', url: other.url, role: 'union', mode: 'direct', apiKey: 'stale' },
          { id: 'ok', url: good.url, role: 'union', mode: 'direct', apiKey: 'right' },
        ],
      },
      {},
    );
    coordinator = await startCoordinator(config, createLogger('test', 'silent'));
    other.seen.length = 0;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${coordinator.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.text();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    // two refusals open the breaker; the misconfigured engine is not asked again
    expect(other.seen.filter((s) => s.path === '/v1/chat/completions')).toHaveLength(2);
  });
});

describe('discovery presents the engine key (SGLang guards /server_info)', () => {
  it('asks a direct instance with its apiKey', async () => {
    const engine = await fakeEngine('sglang', { apiKey: 'disc-key' });
    const config = validateCoordinatorConfig(
      {
        server: { port: 0 },
        instances: [{ id: 's0', url: engine.url, role: 'prefill', mode: 'direct', apiKeyEnv: 'S0_KEY' }],
      },
      { S0_KEY: 'disc-key' },
    );
    const coordinator = await startCoordinator(config, createLogger('test', 'silent'));
    try {
      const info = engine.seen.filter((s) => s.path === '/server_info' || s.path === '/v1/models');
      expect(info.length).toBeGreaterThan(0);
      for (const s of info) expect(s.headers.authorization).toBe('Bearer disc-key');
    } finally {
      await coordinator.close();
      await engine.close();
    }
  });
});
