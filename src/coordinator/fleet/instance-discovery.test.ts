import { createServer, type Server } from 'node:http';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../../test/fixtures/engines/load.js';
import { BodyReader } from '../../common/body-reader.js';
import { closeServer, listen, sendJson } from '../../common/http.js';
import { createLogger, type Logger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { ENGINE_PROXY_DEFAULTS } from '../../engine-proxy/options.js';
import { startEngineProxy } from '../../engine-proxy/server.js';
import { startSimulator } from '../../simulator/server.js';
import { chatBody, http } from '../../simulator/testing/index.js';
import { startCoordinator, type RunningCoordinator } from '../coordinator.js';

/**
 * Discovery end to end, in-process on loopback: real simulators behind real engine proxies (proxy
 * mode), and a fake SGLang serving the `/server_info` fixture (direct mode).
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A logger whose lines the test can read. */
function capturingLogger(): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { log, lines };
}

const quiet = (): Logger => createLogger('discovery-test', 'silent');

async function simBehindProxy(role: 'prefill' | 'decode'): Promise<string> {
  const sim = await startSimulator({ role, kvConnector: 'NixlConnector', timeScale: 0 }, quiet());
  closers.push(() => sim.close());
  const proxy = await startEngineProxy(
    {
      ...ENGINE_PROXY_DEFAULTS,
      engineUrl: sim.url,
      role,
      engine: 'vllm',
      dispatchCapabilities: ['prefill_handoff_decode'],
      dispatchProfile: 'handoff',
      bootstrapHost: null,
      bootstrapPort: null,
      peerAllow: ['http://127.0.0.1:*'],
    },
    quiet(),
  );
  closers.push(() => proxy.close());
  return proxy.url;
}

async function coordinator(instances: unknown[], log: Logger = quiet()): Promise<RunningCoordinator> {
  const config = validateCoordinatorConfig({
    server: { port: 0 },
    instances,
    health: { intervalMs: 200, timeoutMs: 2_000 },
    retry: { maxAttempts: 1 },
    observability: { accessLog: false, metrics: false, dashboard: false },
    management: { port: 0 },
  });
  const running = await startCoordinator(config, log);
  closers.push(() => running.close());
  return running;
}

describe('discovery in proxy mode: `{url, role}` per engine proxy is enough', () => {
  it('serves a P/D request, lists the engine models and is ready', async () => {
    const [p, d] = await Promise.all([simBehindProxy('prefill'), simBehindProxy('decode')]);
    const c = await coordinator([
      { url: p, role: 'prefill' },
      { url: d, role: 'decode' },
    ]);
    const ready = await http(c.url, 'GET', '/ready');
    expect(ready.json).toEqual({ ready: true, models: { 'motor-sim-7b': 'prefill_handoff_decode' } });
    const answer = await http(c.url, 'POST', '/v1/chat/completions', chatBody('hello', { max_tokens: 4 }));
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json.choices[0].message.content).toEqual(expect.any(String));
    const models = await http(c.url, 'GET', '/v1/models');
    expect(models.json.data.map((m: { id: string }) => m.id)).toEqual(['motor-sim-7b']);
  });

  it('configured models still win over the reported ones', async () => {
    const p = await simBehindProxy('prefill');
    const c = await coordinator([{ url: p, role: 'prefill', models: ['alias'] }]);
    const models = await http(c.url, 'GET', '/v1/models');
    expect(models.json.data.map((m: { id: string }) => m.id)).toEqual(['alias']);
  });

  it('a role the proxy refuses: start-up warning, /ready reason, instance not scheduled', async () => {
    const [p, d] = await Promise.all([simBehindProxy('prefill'), simBehindProxy('decode')]);
    const { log, lines } = capturingLogger();
    const c = await coordinator(
      [
        { id: 'p', url: p, role: 'prefill' },
        { id: 'd', url: d, role: 'prefill' },
      ],
      log,
    );
    const reason = 'role: config says prefill, the proxy serves decode and refuses prefill legs';
    const warning = lines.find((l) => l.msg === 'instance discovery' && l.id === 'd');
    expect(warning).toMatchObject({ level: 40, problems: [reason] });
    const ready = await http(c.url, 'GET', '/ready');
    expect(ready.status).toBe(503);
    expect(ready.json.instances).toEqual({ d: `not scheduled: ${reason}` });
    expect(c.controlPlane!.source.routable().map((i) => i.id)).toEqual(['p']);
    // the management API shows what routing uses, not only the config's record
    const view = (await http(c.managementUrl!, 'GET', '/v1/instances/d')).json;
    expect(view).toMatchObject({
      routable: false,
      dispatch_capabilities: [],
      effective: {
        engine: 'vllm',
        profile: 'handoff',
        models: ['motor-sim-7b'],
      },
    });
    expect(view.effective.problem).toBe(`not scheduled: ${reason}`);
  });

  it('an instance down at start-up is held out until it answers, then discovered', async () => {
    const p = await simBehindProxy('prefill');
    const gate = await gatedProxy(p);
    const c = await coordinator([{ id: 'p', url: gate.url, role: 'prefill' }]);
    const before = await http(c.url, 'GET', '/ready');
    expect(before.json.instances.p).toMatch(/^not scheduled: capabilities not discovered yet/);
    // The source hears of the outcome first (it subscribed at start-up), this listener after it.
    const discovered = new Promise((resolve) => c.controlPlane!.discovery.onChange(resolve));
    gate.open();
    expect(await discovered).toBe('p');
    expect(c.controlPlane!.source.routable().map((i) => i.id)).toEqual(['p']);
    expect(c.controlPlane!.source.get('p')?.dispatchCapabilities).toEqual(['prefill_handoff_decode']);
  });
});

describe('discovery and run-time registrations', () => {
  it('a registration of a config id wins: discovery no longer speaks for it', async () => {
    const p = await simBehindProxy('prefill');
    const c = await coordinator([{ id: 'p', url: p, role: 'union', dispatchProfile: 'trigger' }]);
    const plane = c.controlPlane!;
    expect(plane.source.problems()).toEqual({
      p: expect.stringContaining('role: config says union, the proxy serves prefill') as unknown,
    });
    await plane.registry.register({ id: 'p', role: 'prefill', url: p, dispatch_capabilities: [] });
    expect(plane.source.get('p')).toMatchObject({ role: 'prefill', dispatchCapabilities: [] });
    expect(plane.source.problems()).toEqual({});
  });
});

describe('discovery in direct mode: SGLang server info', () => {
  it('gives both legs the bootstrap port /server_info reports (not the HTTP port)', async () => {
    const [p, d] = await Promise.all([fakeSglang('prefill', 9100), fakeSglang('decode', 8998)]);
    const c = await coordinator([
      { url: p.url, role: 'prefill', mode: 'direct', engine: 'sglang' },
      { url: d.url, role: 'decode', mode: 'direct', engine: 'sglang' },
    ]);
    const answer = await http(
      c.url,
      'POST',
      '/v1/chat/completions',
      chatBody('hi', { model: 'Qwen/Qwen3-8B' }),
    );
    expect(answer.status, answer.text).toBe(200);
    for (const fake of [p, d]) expect(fake.bodies[0]).toMatchObject({ bootstrap_port: 9100 });
    const models = await http(c.url, 'GET', '/v1/models');
    expect(models.json.data.map((m: { id: string }) => m.id)).toEqual(['Qwen/Qwen3-8B']);
  });

  it('falls back to /get_server_info (older SGLang)', async () => {
    const [p, d] = await Promise.all([fakeSglang('prefill', 9200, true), fakeSglang('decode', 8998, true)]);
    const c = await coordinator([
      { url: p.url, role: 'prefill', mode: 'direct', engine: 'sglang' },
      { url: d.url, role: 'decode', mode: 'direct', engine: 'sglang' },
    ]);
    expect(c.controlPlane!.source.get('prefill-0')?.bootstrapPort).toBe(9200);
  });
});

async function serve(server: Server): Promise<string> {
  const url = await listen(server, 0, '127.0.0.1');
  closers.push(() => closeServer(server));
  return url;
}

/** Answers 503 to everything until `open()`, then forwards GETs to `target` (an engine that starts late). */
async function gatedProxy(target: string): Promise<{ url: string; open(): void }> {
  let open = false;
  const server = createServer((req, res) => {
    if (!open) return sendJson(res, 503, { status: 'starting' });
    void http(target, 'GET', req.url ?? '/').then((r) => sendJson(res, r.status, r.json));
  });
  return { url: await serve(server), open: () => void (open = true) };
}

/**
 * SGLang as far as the coordinator sees it: `/server_info` (the golden fixture, this mode and
 * bootstrap port), `/health`, `/v1/models`, and a chat answer that records the request body.
 */
async function fakeSglang(
  mode: 'prefill' | 'decode',
  bootstrapPort: number,
  oldPath = false,
): Promise<{ url: string; bodies: Array<Record<string, unknown>> }> {
  const info: Record<string, unknown> = {
    ...fixtureBody('sglang/server/server-info.json'),
    disaggregation_mode: mode,
  };
  const model = String(info.model_path);
  const bodies: Array<Record<string, unknown>> = [];
  const reader = new BodyReader({ maxBytes: 1 << 20 });
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    if (path === (oldPath ? '/get_server_info' : '/server_info'))
      return sendJson(res, 200, { ...info, disaggregation_bootstrap_port: bootstrapPort });
    if (path === '/health') return sendJson(res, 200, {});
    if (path === '/v1/models') return sendJson(res, 200, { object: 'list', data: [{ id: model }] });
    if (path === '/v1/chat/completions')
      return void reader.raw(req).then((buf) => {
        bodies.push(JSON.parse(buf.toString()) as Record<string, unknown>);
        sendJson(res, 200, {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 0,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
      });
    sendJson(res, 404, { error: 'not found' });
  });
  return { url: await serve(server), bodies };
}
