import { afterEach, describe, expect, it } from 'vitest';
import { engineReply, unreachable, withSglangServerInfo, type EngineScript } from './testing/fake-clients.js';
import { startInProcessProxy, type InProcessProxy } from './testing/in-process-proxy.js';

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const echo: EngineScript = (req) =>
  engineReply(201, [`${req.method} ${req.path} `, String(req.body ?? '')], {
    headers: { 'content-type': 'text/plain', 'x-engine': 'e', 'content-length': '99' },
  });

describe('pass-through', () => {
  const cases: Array<{
    name: string;
    method: 'GET' | 'POST';
    path: string;
    body?: unknown;
    text: string;
    route: string;
  }> = [
    {
      name: 'GET with its query',
      method: 'GET',
      path: '/v1/models?x=1',
      text: 'GET /v1/models?x=1 ',
      route: '/v1/models',
    },
    {
      name: 'POST elsewhere',
      method: 'POST',
      path: '/tokenize',
      body: { prompt: 'x' },
      text: 'POST /tokenize {"prompt":"x"}',
      route: '/tokenize',
    },
    {
      name: 'a chat body without an envelope, unparsed',
      method: 'POST',
      path: '/v1/chat/completions',
      body: '{"model":"m" , "messages":[]}',
      text: 'POST /v1/chat/completions {"model":"m" , "messages":[]}',
      route: '/v1/chat/completions',
    },
    {
      name: 'a JSON array mentioning _motor_',
      method: 'POST',
      path: '/v1/completions',
      body: '["_motor_dispatch"]',
      text: 'POST /v1/completions ["_motor_dispatch"]',
      route: '/v1/completions',
    },
    {
      name: "the engine's metrics",
      method: 'GET',
      path: '/v1/motor/engine-metrics',
      text: 'GET /metrics ',
      route: '/v1/motor/engine-metrics',
    },
  ];

  it.each(cases)('$name', async ({ method, path, body, text, route }) => {
    proxy = await startInProcessProxy({}, echo);
    const res = await proxy.call(method, path, body, {
      headers: { 'x-client': 'c', connection: 'keep-alive' },
    });
    expect(res.status).toBe(201);
    expect(res.text).toBe(text);
    expect(res.headers['x-engine']).toBe('e');
    expect(res.headers['content-length']).toBeUndefined(); // streamed, never a stale length
    expect(proxy.engine.requests[0]!.headers['x-client']).toBe('c');
    expect(proxy.engine.requests[0]!.headers.connection).toBeUndefined();
    expect(await proxy.metric(`motor_proxy_pass_through_total{route="${route}"}`)).toBe(1);
  });

  const refusals: Array<{
    name: string;
    opts: object;
    engine: EngineScript;
    path: string;
    body?: unknown;
    status: number;
    text: string;
  }> = [
    {
      name: 'request target not origin-form',
      opts: {},
      engine: echo,
      path: '//elsewhere/x',
      status: 400,
      text: '{"error":{"message":"request target must be an absolute path (origin-form)","type":"invalid_request_error","param":null,"code":null}}',
    },
    {
      name: 'engine unreachable',
      opts: {},
      engine: unreachable,
      path: '/v1/models',
      status: 502,
      text: '{"error":{"message":"engine unreachable: connect ECONNREFUSED 10.0.0.5:30000","type":"server_error","param":null,"code":null}}',
    },
    {
      name: 'body too large',
      opts: { maxBodyBytes: 10 },
      engine: echo,
      path: '/tokenize',
      body: { prompt: 'far too long' },
      status: 413,
      text: '{"error":{"message":"request body exceeds 10 bytes","type":"invalid_request_error","param":null,"code":null}}',
    },
    {
      name: 'a prefill result without an envelope',
      opts: {},
      engine: echo,
      path: '/v1/chat/completions',
      body: { _motor_prefill_result: {} },
      status: 400,
      text: '{"error":{"message":"_motor_prefill_result needs a _motor_dispatch","type":"invalid_request_error","param":"_motor_prefill_result","code":null}}',
    },
  ];

  it.each(refusals)('$name → $status', async ({ opts, engine, path, body, status, text }) => {
    proxy = await startInProcessProxy(opts, engine);
    const res = await proxy.call(body === undefined ? 'GET' : 'POST', path, body);
    expect(res.status).toBe(status);
    expect(res.text).toBe(text);
    if (status === 413) expect(res.headers.connection).toBe('close');
  });
});

describe('health and info', () => {
  it('/v1/motor/info reports the role, capabilities and (SGLang prefill) the bootstrap address', async () => {
    proxy = await startInProcessProxy(
      { engine: 'sglang', dispatchCapabilities: ['concurrent_engine_sync'] },
      withSglangServerInfo(unreachable, 8998),
    );
    expect((await proxy.call('GET', '/v1/motor/info')).json).toEqual({
      object: 'motor.engine_proxy_info',
      schema_version: '1.0',
      engine: 'sglang',
      role: 'prefill',
      dispatch_profile: 'test',
      dispatch_capabilities: ['concurrent_engine_sync'],
      kv_connector: null,
      accepts_roles: ['prefill', 'single'],
      bootstrap: { host: '10.0.0.5', port: 8998 },
    });
  });

  const health: Array<{ name: string; engine: EngineScript; status: number; json: unknown }> = [
    {
      name: 'engine healthy',
      engine: () => engineReply(200, ''),
      status: 200,
      json: { status: 'ok', engine: { status: 200 } },
    },
    {
      name: 'engine unhealthy',
      engine: () => engineReply(500, 'x'.repeat(600)),
      status: 503,
      json: { status: 'unhealthy', engine: { status: 500, body: 'x'.repeat(500) } },
    },
    {
      name: 'engine unreachable',
      engine: unreachable,
      status: 503,
      json: { status: 'unhealthy', engine: { error: 'connect ECONNREFUSED 10.0.0.5:30000' } },
    },
  ];

  it.each(health)('/health: $name → $status', async ({ engine, status, json }) => {
    proxy = await startInProcessProxy({}, engine);
    const res = await proxy.call('GET', '/health');
    expect(res.status).toBe(status);
    expect(res.json).toEqual(json);
    expect(proxy.engine.requests[0]).toMatchObject({ method: 'GET', path: '/health', timeoutMs: 2000 });
  });

  it('/debug/state reports the tracker and prepared store sizes', async () => {
    proxy = await startInProcessProxy({}, unreachable);
    expect((await proxy.call('GET', '/debug/state')).json).toEqual({
      attempts_active: 0,
      attempts_tracked: 0,
      prepared_prefills: 0,
      metaserver_waiting: 0,
    });
  });
});
