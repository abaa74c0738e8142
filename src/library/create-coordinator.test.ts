import { createServer, type Server } from 'node:http';
import {
  InMemorySpanExporter,
  BasicTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { z } from 'zod';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../common/http.js';
import { createLogger } from '../common/logger.js';
import {
  ConfigError,
  validateCoordinatorConfig,
  type CoordinatorConfigInput,
} from '../config/coordinator-config.js';
import { definePlugin } from '../scheduling/plugin.js';
import { startSimulator, type RunningSimulator } from '../simulator/server.js';
import { chatBody, post, sseEvents } from '../simulator/testing/index.js';
import { createCoordinator, type Coordinator } from './create-coordinator.js';

const quiet = createLogger('test', 'silent');
const nixl = (role: 'prefill' | 'decode') => ({
  kv_connector: 'NixlConnector',
  kv_role: role === 'prefill' ? 'kv_producer' : 'kv_consumer',
});

/** A picker that takes the last candidate and counts its calls (a plugin an application registers). */
const picks: string[] = [];
const lastPicker = definePlugin({
  type: 'test-last',
  kind: 'picker',
  description: 'takes the last candidate',
  params: z.strictObject({ tag: z.string() }),
  create: (params) => ({
    pick: (_ctx, candidates) => {
      picks.push(`${params.tag}:${candidates[candidates.length - 1]!.id}`);
      return candidates.length - 1;
    },
  }),
});

describe('createCoordinator', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
    picks.length = 0;
  });

  async function fleet(sim: Partial<RunningSimulator['core']['opts']> = {}, decodes = 1) {
    const sims = await Promise.all(
      ['prefill', ...Array<'decode'>(decodes).fill('decode')].map((role) =>
        startSimulator(
          { role: role as 'prefill' | 'decode', timeScale: 0, kvConnector: 'NixlConnector', ...sim },
          quiet,
        ),
      ),
    );
    cleanup.push(async () => void (await Promise.all(sims.map((s) => s.close()))));
    return sims.map((s, i) => {
      const role = i === 0 ? ('prefill' as const) : ('decode' as const);
      return { id: `${role}-${i}`, url: s.url, role, mode: 'direct' as const, kvTransferConfig: nixl(role) };
    });
  }

  async function serve(motor: Coordinator): Promise<string> {
    const server: Server = createServer(motor.handler);
    const url = await listen(server, 0, '127.0.0.1');
    cleanup.push(async () => {
      await motor.close({ graceMs: 0 });
      await closeServer(server);
    });
    return url;
  }

  it.each([
    [{ instances: [{ url: 'http://127.0.0.1:1', role: 'prefil' }] }],
    [{ retry: { maxAttempts: 'many' } }],
    [{ scheduling: { decode: { picker: { type: 'nope' } } } }],
    [{ unknownKey: 1 }],
  ])('refuses %j with the same path-naming ConfigError as the YAML path', async (config) => {
    const expected = (() => {
      try {
        validateCoordinatorConfig(config, {});
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error('expected the config to be invalid');
    })();
    // typed callers cannot write these; a config read from YAML or JSON is only checked at run time
    const untyped = config as CoordinatorConfigInput;
    await expect(createCoordinator(untyped, { logger: quiet, env: {} })).rejects.toThrow(ConfigError);
    await expect(createCoordinator(untyped, { logger: quiet, env: {} })).rejects.toThrow(expected);
  });

  it('routes with a registered plugin, names it among the known types, and refuses a taken type', async () => {
    const instances = await fleet({}, 2);
    const config = {
      instances,
      scheduling: { decode: { picker: { type: 'test-last', params: { tag: 't' } } } },
    };
    // without registering, the type is unknown; registered, its params are checked by its own schema
    await expect(createCoordinator(config, { logger: quiet })).rejects.toThrow(
      "scheduling.decode.picker.type: unknown picker 'test-last'",
    );
    await expect(
      createCoordinator(
        { ...config, scheduling: { decode: { picker: { type: 'test-last', params: {} } } } },
        { logger: quiet, plugins: [lastPicker] },
      ),
    ).rejects.toThrow('scheduling.decode.picker.params.tag');
    await expect(
      createCoordinator({}, { logger: quiet, plugins: [{ ...lastPicker, type: 'least-load' }] }),
    ).rejects.toThrow("scheduling plugin type 'least-load' is registered twice");
    const motor = await createCoordinator(config, { logger: quiet, plugins: [lastPicker] });
    const url = await serve(motor);
    for (let i = 0; i < 2; i++) {
      const res = await post(url, '/v1/chat/completions', chatBody(`hello ${i}`, { max_tokens: 2 }));
      expect(res.status).toBe(200);
    }
    expect(picks).toEqual(['t:decode-2', 't:decode-2']);
  });

  it("puts its metrics on the application's registry and its spans on the application's tracer", async () => {
    const registry = new Registry();
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const motor = await createCoordinator(
      { instances: await fleet() },
      { logger: quiet, registry, tracer: provider.getTracer('app') },
    );
    const url = await serve(motor);
    expect((await post(url, '/v1/chat/completions', chatBody('hi', { max_tokens: 2 }))).status).toBe(200);
    expect(motor.registry).toBe(registry);
    const text = await registry.metrics();
    expect(text).toMatch(
      /motor_requests_total\{route="\/v1\/chat\/completions",plan="handoff",outcome="ok"\} 1/,
    );
    expect(text).not.toContain('process_cpu_user_seconds_total'); // the application's to collect
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(
      expect.arrayContaining(['motor.request', 'motor.leg.prefill', 'motor.leg.decode']),
    );
    await motor.close();
    await provider.forceFlush(); // the caller's provider still works after close
    await provider.shutdown();
  });

  it('close() lets a stream in flight finish, refuses new requests meanwhile, and is idempotent', async () => {
    // ~15 ms per token: the stream is still running when close() starts
    const motor = await createCoordinator(
      { instances: await fleet({ timeScale: 1, itlMs: 15, prefillOverheadMs: 0 }) },
      { logger: quiet },
    );
    const url = await serve(motor);
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('drain me', { max_tokens: 20, stream: true })),
    });
    expect(res.statusCode).toBe(200);
    const chunks: string[] = [];
    const reader = res.body[Symbol.asyncIterator]();
    chunks.push(String((await reader.next()).value)); // the stream has started
    expect(motor.inFlight()).toBe(1);
    const closed = motor.close({ graceMs: 30_000 });
    expect(motor.close()).toBe(closed);
    const refused = await post(url, '/v1/chat/completions', chatBody('late'));
    expect([refused.status, refused.json.error.code, refused.headers.connection]).toEqual([
      503,
      'overloaded',
      'close',
    ]);
    // a metaserver call still reaches its route (it would complete a direct-trigger request in flight)
    expect((await post(url, '/v1/metaserver/no-such-token', {})).status).toBe(404);
    for (let r = await reader.next(); !r.done; r = await reader.next()) chunks.push(String(r.value));
    await closed;
    const events = sseEvents(chunks.join(''));
    expect(events[events.length - 1]).toBe('[DONE]');
    expect(motor.inFlight()).toBe(0);
  });

  it('tells direct trigger decodes the address the first request came in on (no server.publicUrl)', async () => {
    const layerwise = { kv_connector: 'MooncakeLayerwiseConnector' };
    const instances = (await fleet({ kvConnector: 'MooncakeLayerwiseConnector' })).map((i) => ({
      ...i,
      kvTransferConfig: { ...layerwise, kv_role: i.role === 'prefill' ? 'kv_producer' : 'kv_consumer' },
    }));
    const motor = await createCoordinator({ instances }, { logger: quiet });
    const url = await serve(motor);
    const res = await post(url, '/v1/chat/completions', chatBody('trigger', { max_tokens: 2 }));
    expect(res.status).toBe(200);
    expect(await motor.registry.metrics()).toContain(
      'motor_requests_total{route="/v1/chat/completions",plan="trigger",outcome="ok"} 1',
    );
  });

  it('serves the management API and the metrics as listeners of their own', async () => {
    const motor = await createCoordinator({ instances: await fleet() }, { logger: quiet });
    await serve(motor);
    const server = createServer((req, res) =>
      req.url === '/prom' ? motor.metricsHandler(req, res) : motor.managementHandler(req, res),
    );
    const url = await listen(server, 0, '127.0.0.1');
    cleanup.push(() => closeServer(server));
    const list = (await request(`${url}/v1/instances`).then((r) => r.body.json())) as {
      data: { id: string; routable: boolean }[];
    };
    expect(list.data.map((i) => [i.id, i.routable])).toEqual([
      ['decode-1', true],
      ['prefill-0', true],
    ]);
    const prom = await request(`${url}/prom`);
    expect(prom.headers['content-type']).toMatch(/^text\/plain/);
    expect(await prom.body.text()).toContain('motor_requests_in_flight');
  });
});
