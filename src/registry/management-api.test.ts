import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import type { InstanceHealth } from './health-prober.js';
import {
  startManagementServer,
  type ManagementServer,
  type ManagementServerOptions,
} from './management-api.js';
import { MemoryRegistry } from './memory-registry.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON under test
}

let server: ManagementServer | undefined;
let registry: MemoryRegistry;

afterEach(async () => {
  await server?.close();
  await registry?.close();
  server = undefined;
});

async function start(options: Partial<ManagementServerOptions> = {}): Promise<string> {
  registry = new MemoryRegistry();
  server = await startManagementServer({ registry, ...options });
  return server.url;
}

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await request(`${server!.url}${path}`, {
    method: method as 'GET',
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const P0 = {
  id: 'p-0',
  role: 'prefill',
  url: 'http://10.0.0.1:8000/',
  engine_config: { kv_transfer_config: { kv_connector: 'NixlConnector' } },
  models: ['llama'],
};

function expectOpenAiError(reply: Reply, status: number, param: string | null, code?: string): void {
  expect(reply.status).toBe(status);
  expect(Object.keys(reply.body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(reply.body.error.param).toBe(param);
  if (param) expect(reply.body.error.message).toContain(param);
  if (code) expect(reply.body.error.code).toBe(code);
}

describe('management API over HTTP', () => {
  it("an operator's pause survives the self-registered proxy's lease expiry and re-registration", async () => {
    const clock = new ManualClock();
    registry = new MemoryRegistry({ timers: clock });
    server = await startManagementServer({ registry });
    const self = { ...P0, lease_ttl_ms: 2000 };
    expect((await call('POST', '/v1/instances', self)).status).toBe(201);
    expect((await call('POST', '/v1/instances/p-0/pause')).body.state).toBe('paused');
    clock.advance(2000); // no heartbeat: the lease expires and the record is gone
    expect((await call('GET', '/v1/instances/p-0')).status).toBe(404);
    const again = await call('POST', '/v1/instances', self);
    expect(again).toMatchObject({ status: 201, body: { id: 'p-0', state: 'paused', source: 'self' } });
    expect((await call('GET', '/v1/instances')).body.data[0].state).toBe('paused');
    expect((await call('POST', '/v1/instances/p-0/resume')).body.state).toBe('active');
  });

  it('registers (201), re-registers (200), lists and shows instances with live providers', async () => {
    const health: InstanceHealth = {
      status: 'healthy',
      consecutive_failures: 0,
      consecutive_successes: 4,
      last_probe_at_ms: 1,
      last_error: null,
      changed_at_ms: 1,
    };
    await start({
      health: { health: () => health, isRoutable: (id) => registry.get(id)?.state === 'active' },
      load: (id) => ({ queue_depth: id.length }),
      circuit: () => 'closed',
    });
    const created = await call('POST', '/v1/instances', P0);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: 'p-0',
      url: 'http://10.0.0.1:8000',
      dispatch_capabilities: ['prefill_handoff_decode'],
      state: 'active',
      source: 'api',
      lease: null,
    });
    expect((await call('POST', '/v1/instances', { ...P0, models: ['other'] })).status).toBe(200);
    await call('POST', '/v1/instances', {
      id: 'd-0',
      role: 'decode',
      url: 'http://10.0.0.2:8000',
      engine: 'sglang',
    });
    const done = registry.startRequest('d-0')!;
    const list = await call('GET', '/v1/instances');
    expect(list.status).toBe(200);
    expect(list.body.object).toBe('list');
    expect(list.body.data.map((v: { id: string }) => v.id)).toEqual(['d-0', 'p-0']);
    expect(list.body.data[0]).toMatchObject({
      id: 'd-0',
      dispatch_capabilities: ['concurrent_engine_sync'],
      health: { status: 'healthy' },
      routable: true,
      in_flight: 1,
      load: { queue_depth: 3 },
      circuit: 'closed',
    });
    done();
    expect((await call('GET', '/v1/instances/p-0')).body).toMatchObject({
      id: 'p-0',
      models: ['other'],
      in_flight: 0,
    });
    expectOpenAiError(await call('GET', '/v1/instances/nope'), 404, 'id', 'not_found');
  });

  it('without providers, health/load/circuit are null and routable follows the state', async () => {
    await start();
    await call('POST', '/v1/instances', P0);
    await call('POST', '/v1/instances/p-0/pause');
    const view = (await call('GET', '/v1/instances/p-0')).body;
    expect(view).toMatchObject({ health: null, load: null, circuit: null, routable: false, state: 'paused' });
  });

  it('validates every body with 4xx OpenAI-style errors naming the field', async () => {
    await start({ bodyLimitBytes: 2048 });
    expectOpenAiError(await call('POST', '/v1/instances', '{"id": '), 400, null, 'invalid_json');
    expectOpenAiError(await call('POST', '/v1/instances', '[1,2]'), 400, null, 'invalid_body');
    expectOpenAiError(await call('POST', '/v1/instances', ''), 400, null, 'invalid_body');
    const cases: [unknown, string][] = [
      [{ ...P0, role: undefined }, 'role'],
      [{ ...P0, role: 'leader' }, 'role'],
      [{ ...P0, url: 'gopher://x' }, 'url'],
      [{ ...P0, id: '' }, 'id'],
      [{ ...P0, engine: 'trt' }, 'engine'],
      [{ ...P0, mode: 'sideways' }, 'mode'],
      [{ ...P0, models: [''] }, 'models[0]'],
      [{ ...P0, dispatch_capabilities: ['x'] }, 'dispatch_capabilities[0]'],
      [{ ...P0, engine_config: undefined, dispatch_profile: 'nope' }, 'dispatch_profile'],
      [{ ...P0, lease_ttl_ms: 10 }, 'lease_ttl_ms'],
      [{ ...P0, surprise: true }, 'surprise'],
    ];
    for (const [body, param] of cases) {
      const reply = await call('POST', '/v1/instances', body);
      expectOpenAiError(reply, 400, param, 'invalid_instance');
      expect(reply.body.error.type).toBe('invalid_request_error');
    }
    expectOpenAiError(
      await call('POST', '/v1/instances', { ...P0, labels: { pad: 'x'.repeat(4096) } }),
      413,
      null,
      'body_too_large',
    );
    await call('POST', '/v1/instances', P0);
    expectOpenAiError(await call('POST', '/v1/instances/p-0/drain', { wait_ms: -1 }), 400, 'wait_ms');
    expectOpenAiError(await call('POST', '/v1/instances/p-0/pause', { now: true }), 400, 'now');
    expect(registry.list().map((r) => r.id)).toEqual(['p-0']);
    expect((await call('GET', '/v1/instances')).status).toBe(200); // still serving
  });

  it.each([
    ['endpoint only: topic defaults to ""', { endpoint: 'tcp://10.0.0.1:5557' }, 201, null],
    [
      'endpoint, replay endpoint and topic',
      { endpoint: 'tcp://10.0.0.1:5557', replayEndpoint: 'tcp://10.0.0.1:5558', topic: 'kv' },
      201,
      null,
    ],
    ['not a ZeroMQ endpoint', { endpoint: 'http://10.0.0.1:5557' }, 400, 'kv_events.endpoint'],
    ['an unknown field', { endpoint: 'tcp://10.0.0.1:5557', port: 1 }, 400, 'kv_events.port'],
  ])('a registration carries kv_events (the config schema): %s', async (_name, kvEvents, status, param) => {
    await start();
    const reply = await call('POST', '/v1/instances', { ...P0, kv_events: kvEvents });
    if (param !== null) return expectOpenAiError(reply, status, param);
    expect(reply.status).toBe(status);
    expect(reply.body.kv_events).toEqual({ topic: '', ...kvEvents });
    expect(registry.get('p-0')!.kv_events).toEqual({ topic: '', ...kvEvents });
    // re-registered without it (a restarted engine that stopped publishing): gone
    expect((await call('POST', '/v1/instances', P0)).body.kv_events).toBeNull();
  });

  it('deletes instances, 404 for unknown ids', async () => {
    await start();
    await call('POST', '/v1/instances', P0);
    const deleted = await call('DELETE', '/v1/instances/p-0');
    expect(deleted).toMatchObject({ status: 200, body: { id: 'p-0', deleted: true } });
    expect(registry.get('p-0')).toBeUndefined();
    expectOpenAiError(await call('DELETE', '/v1/instances/p-0'), 404, 'id');
    for (const action of ['drain', 'pause', 'resume', 'heartbeat']) {
      expectOpenAiError(await call('POST', `/v1/instances/p-0/${action}`), 404, 'id');
    }
  });

  it('pause, resume, and drain that waits for in-flight work', async () => {
    await start();
    await call('POST', '/v1/instances', P0);
    expect((await call('POST', '/v1/instances/p-0/pause')).body.state).toBe('paused');
    expect(registry.startRequest('p-0')).toBeUndefined();
    expect((await call('POST', '/v1/instances/p-0/resume', {})).body.state).toBe('active');
    const done = registry.startRequest('p-0')!;
    const quick = await call('POST', '/v1/instances/p-0/drain');
    expect(quick.body).toMatchObject({ state: 'draining', in_flight: 1, drained: false });
    expect((await call('POST', '/v1/instances/p-0/drain', { wait_ms: 0 })).body.drained).toBe(false);
    setTimeout(done, 150);
    const t0 = performance.now();
    const waited = await call('POST', '/v1/instances/p-0/drain', { wait_ms: 5000 });
    expect(waited.body).toMatchObject({ state: 'draining', in_flight: 0, drained: true });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(100);
    expect(registry.startRequest('p-0')).toBeUndefined();
  });

  it('heartbeat renews a self-registered lease', async () => {
    await start();
    const reg = await call('POST', '/v1/instances', { ...P0, lease_ttl_ms: 1500 });
    expect(reg.body).toMatchObject({ source: 'self', lease: { ttl_ms: 2000, renew: 'heartbeat' } });
    const hb = await call('POST', '/v1/instances/p-0/heartbeat');
    expect(hb).toMatchObject({ status: 200, body: { id: 'p-0', lease: { ttl_ms: 2000 } } });
  });

  it('requires the admin token when configured: 401 without, 403 when wrong', async () => {
    await start({ adminToken: 's3cret' });
    const missing = await call('GET', '/v1/instances');
    expectOpenAiError(missing, 401, null, 'unauthorized');
    expect(missing.body.error.type).toBe('authentication_error');
    expect(missing.headers['www-authenticate']).toBe('Bearer');
    expectOpenAiError(
      await call('GET', '/v1/instances', undefined, { authorization: 'Basic czNjcmV0' }),
      401,
      null,
    );
    const wrong = await call('POST', '/v1/instances', P0, { authorization: 'Bearer nope' });
    expectOpenAiError(wrong, 403, null, 'forbidden');
    expect(registry.list()).toEqual([]);
    const ok = await call('POST', '/v1/instances', P0, { authorization: 'Bearer s3cret' });
    expect(ok.status).toBe(201);
  });

  it('unknown routes are 404, wrong methods 405 with Allow', async () => {
    await start();
    expectOpenAiError(await call('GET', '/v1/models'), 404, null, 'unknown_route');
    expectOpenAiError(await call('POST', '/v1/instances/p-0/explode'), 404, null);
    const wrong = await call('PUT', '/v1/instances');
    expectOpenAiError(wrong, 405, null, 'method_not_allowed');
    expect(wrong.headers.allow).toBe('GET, POST');
    expect((await call('GET', '/v1/instances/p-0/drain')).headers.allow).toBe('POST');
  });
});

describe('POST /instances/refresh (seed event message)', () => {
  const seedInstance = (n: number, role: string) => ({
    instance_id: n,
    role,
    url: `http://10.0.1.${n}:8000`,
    engine_config: { kv_transfer_config: { kv_connector: 'MooncakeConnectorV1' } },
  });

  it('add registers (seed integer ids accepted), pause/resume/del by id, unknown ids reported', async () => {
    await start();
    const add = await call('POST', '/instances/refresh', {
      event: 'add',
      instances: [seedInstance(1, 'prefill'), seedInstance(2, 'decode')],
    });
    expect(add).toMatchObject({
      status: 200,
      body: { event: 'add', applied: ['1', '2'], removed: [], not_found: [] },
    });
    expect(registry.get('1')).toMatchObject({
      source: 'refresh',
      role: 'prefill',
      dispatch_capabilities: ['prefill_handoff_decode'],
    });
    const pause = await call('POST', '/instances/refresh', {
      event: 'pause',
      instances: [1, { instance_id: 9 }],
    });
    expect(pause.body).toMatchObject({ applied: ['1'], not_found: ['9'] });
    expect(registry.get('1')?.state).toBe('paused');
    await call('POST', '/instances/refresh', { event: 'resume', instances: [{ id: '1' }] });
    expect(registry.get('1')?.state).toBe('active');
    const del = await call('POST', '/instances/refresh', {
      event: 'del',
      instances: ['2', seedInstance(7, 'decode')],
    });
    expect(del.body).toMatchObject({ removed: ['2'], not_found: ['7'] });
    expect(registry.list().map((r) => r.id)).toEqual(['1']);
  });

  it('set replaces the refresh-managed fleet and leaves other sources alone', async () => {
    await start();
    await call('POST', '/v1/instances', P0);
    await call('POST', '/instances/refresh', {
      event: 'add',
      instances: [seedInstance(1, 'prefill'), seedInstance(2, 'decode')],
    });
    const set = await call('POST', '/instances/refresh', {
      event: 'set',
      instances: [seedInstance(2, 'decode'), seedInstance(3, 'decode')],
    });
    expect(set.body).toMatchObject({ event: 'set', applied: ['2', '3'], removed: ['1'] });
    expect(
      registry
        .list()
        .map((r) => r.id)
        .sort(),
    ).toEqual(['2', '3', 'p-0']);
  });

  it('an invalid message is refused as a whole, naming the field', async () => {
    await start();
    const bad = await call('POST', '/instances/refresh', {
      event: 'add',
      instances: [seedInstance(1, 'prefill'), { ...seedInstance(2, 'decode'), role: 'leader' }],
    });
    expectOpenAiError(bad, 400, 'instances[1].role', 'invalid_instance');
    expect(registry.list()).toEqual([]);
    expectOpenAiError(
      await call('POST', '/instances/refresh', { event: 'upsert', instances: [] }),
      400,
      'event',
    );
    expectOpenAiError(await call('POST', '/instances/refresh', { event: 'add' }), 400, 'instances');
    expectOpenAiError(
      await call('POST', '/instances/refresh', { event: 'del', instances: [-1] }),
      400,
      'instances[0]',
    );
    expectOpenAiError(
      await call('POST', '/instances/refresh', {
        event: 'add',
        instances: [{ ...seedInstance(1, 'prefill'), id: 'x' }],
      }),
      400,
      'instances[0].instance_id',
    );
    expectOpenAiError(
      await call('POST', '/instances/refresh', { event: 'add', instances: ['1'] }),
      400,
      'instances[0]',
    );
  });
});
