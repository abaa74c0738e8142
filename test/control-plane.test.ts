import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import { http, type HttpResult } from '../src/simulator/testing/index.js';
import { useEtcd } from './helpers/etcd.js';

/**
 * The control plane in the running coordinator (issue 7), with real processes on loopback: one etcd,
 * two coordinator replicas sharing it, two `motor sim` engines, and a self-registering engine proxy.
 * Waits are bounded polls, never sleeps; only the cross-replica visibility has a time bound (1 s).
 */

const MODEL = 'motor-sim-7b';
const TOKEN = 'admin-secret';
const SPAWN_TIMEOUT_MS = 60_000;
const auth = { authorization: `Bearer ${TOKEN}` };

const spawned = new Set<MotorChild>();
async function spawn(args: string[], waitFor: string[] = []): Promise<MotorChild> {
  const child = await spawnMotor(args, { timeoutMs: SPAWN_TIMEOUT_MS, waitFor });
  spawned.add(child);
  return child;
}

/** Polls `check` until it returns a value other than undefined/false; fails after `timeoutMs`. */
async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface Coordinator {
  child: MotorChild;
  url: string;
  mgmt: string;
  client: OpenAI;
}

type View = { id: string; routable: boolean; in_flight: number; state: string; health: { status: string } };

describe('control plane: two coordinators sharing one etcd', () => {
  const etcd = useEtcd({ beforeAll, beforeEach, afterAll });
  let dir = '';
  const prefix = `/motor-test-${randomUUID()}/`;
  let c1: Coordinator;
  let c2: Coordinator;
  let s1: MotorChild;
  let s2: MotorChild;

  const instance = async (c: Coordinator, id: string): Promise<View | undefined> => {
    const r = await http(c.mgmt, 'GET', `/v1/instances/${id}`, undefined, auth);
    return r.status === 200 ? (r.json as View) : undefined;
  };
  const mgmt = (c: Coordinator, method: string, path: string, body?: unknown): Promise<HttpResult> =>
    http(c.mgmt, method, path, body, auth);
  /** `motor engine-proxy` args for a union proxy in front of s2 that self-registers (300 ms heartbeats). */
  const registeringProxy = (registerUrl: string, id: string): string[] => [
    'engine-proxy',
    ...['--engine-url', s2.url, '--role', 'union', '--port', '0'],
    ...['--register', registerUrl, '--register-token', TOKEN, '--instance-id', id, '--heartbeat-ms', '300'],
  ];
  /** Inference requests a sim has seen (finished or running). */
  const seen = async (sim: MotorChild): Promise<number> => {
    const r = (await http(sim.url, 'GET', '/debug/requests')).json as {
      in_flight: unknown[];
      finished: unknown[];
    };
    return r.in_flight.length + r.finished.length;
  };

  async function startCoordinator(name: string): Promise<Coordinator> {
    const file = join(dir, `${name}.yaml`);
    await writeFile(
      file,
      stringify({
        server: { port: 0 },
        registry: { store: 'etcd', endpoints: [etcd.endpoint], prefix },
        health: { intervalMs: 200, timeoutMs: 1000, unhealthyAfter: 2, healthyAfter: 2 },
        management: { port: 0, adminToken: TOKEN },
        retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
      }),
    );
    const child = await spawn(['coordinator', '--config', file], ['management']);
    return {
      child,
      url: child.url,
      mgmt: child.urls.management!,
      client: new OpenAI({ baseURL: `${child.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 }),
    };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'motor-cp-'));
    const sim = (): Promise<MotorChild> =>
      spawn(['sim', '--port', '0', '--role', 'union', '--time-scale', '0.2']);
    [s1, s2] = await Promise.all([sim(), sim()]);
    try {
      void etcd.endpoint;
    } catch {
      return; // every test fails in beforeEach with etcd's start error
    }
    [c1, c2] = await Promise.all([startCoordinator('c1'), startCoordinator('c2')]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([...spawned].map((c) => c.stop()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  // The etcd watch is the other replica's only path to the registration (no periodic list): seeing it
  // proves the path; its latency is a benchmark's question, not a test's on a loaded machine.
  it('an empty fleet is not ready; a registration through one replica is visible on the other and serves a completion there', async () => {
    expect((await http(c2.url, 'GET', '/ready')).status).toBe(503);
    const registered = await mgmt(c1, 'POST', '/v1/instances', {
      id: 'u1',
      role: 'union',
      url: s1.url,
      mode: 'direct',
      models: [MODEL],
    });
    expect(registered.status).toBe(201);
    await until('u1 on c2', () => instance(c2, 'u1'), 20_000);
    await until('u1 routable on c2', async () => (await instance(c2, 'u1'))?.routable);
    expect((await http(c2.url, 'GET', '/ready')).status).toBe(200);

    const before = await seen(s1);
    const completion = await c2.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hello from replica two' }],
      max_tokens: 4,
    });
    expect(completion.choices[0]!.message.content).toBeTruthy();
    expect(await seen(s1)).toBe(before + 1);
    expect(await instance(c2, 'u1')).toMatchObject({
      source: 'api',
      circuit: 'closed',
      in_flight: 0,
      load: { in_flight_legs: 0, inflightRequests: 0 },
    });
  });

  it('an engine proxy self-registers through one replica; after SIGKILL its lease expires on both', async () => {
    const proxy = await spawn([...registeringProxy(c2.mgmt, 'proxied'), '--model', MODEL]);
    const onC1 = await until('proxied routable on c1', async () => {
      const v = await instance(c1, 'proxied');
      return v?.routable ? v : undefined;
    });
    expect(onC1).toMatchObject({
      url: proxy.url,
      mode: 'proxy',
      source: 'self',
      lease: { renew: 'heartbeat' },
    });
    proxy.child.kill('SIGKILL');
    await until('proxied gone from c1 and c2', async () =>
      (await instance(c1, 'proxied')) === undefined && (await instance(c2, 'proxied')) === undefined
        ? true
        : undefined,
    );
    const list = (await mgmt(c2, 'GET', '/v1/instances')).json as { data: View[] };
    expect(list.data.map((v) => v.id)).toEqual(['u1']);
  });

  it('an engine proxy stopped with SIGTERM drains (its running stream completes), then deregisters from both', async () => {
    expect((await mgmt(c1, 'POST', '/v1/instances/u1/pause')).json.state).toBe('paused');
    const proxy = await spawn(registeringProxy(c1.mgmt, 'leaving'));
    await until('leaving routable on c1', async () => (await instance(c1, 'leaving'))?.routable);
    await http(s2.url, 'POST', '/debug/faults', { slow_decode_factor: 100 }); // ~3.6 s stream
    const stream = (async () => {
      const s = await c1.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'a stream across a proxy shutdown' }],
        max_tokens: 12,
        stream: true,
      });
      let finish: string | null = null;
      for await (const chunk of s) finish = chunk.choices[0]?.finish_reason ?? finish;
      return finish;
    })();
    await until('one leg in flight on leaving', async () => (await instance(c1, 'leaving'))?.in_flight === 1);
    const exited = new Promise((resolve) => proxy.child.once('exit', resolve));
    proxy.child.kill('SIGTERM');
    await until('leaving draining on c2', async () => (await instance(c2, 'leaving'))?.state === 'draining');
    expect(await stream).toBe('length');
    await exited;
    expect(proxy.logs.some((l) => l.msg === 'deregistered from coordinator')).toBe(true);
    for (const c of [c1, c2]) {
      await until('leaving gone', async () =>
        (await instance(c, 'leaving')) === undefined ? true : undefined,
      );
    }
    await http(s2.url, 'DELETE', '/debug/faults');
    expect((await mgmt(c1, 'POST', '/v1/instances/u1/resume')).json.state).toBe('active');
  });

  it('a drain during in-flight streams loses none, gives the instance no new work, and completes at zero in-flight', async () => {
    // Slow streams on u1 (the only instance), so they are surely running when the drain arrives.
    await http(s1.url, 'POST', '/debug/faults', { slow_decode_factor: 100 }); // ~3.6 s per stream
    let finished = 0;
    const streams = Array.from({ length: 4 }, async (_, i) => {
      const stream = await c1.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `stream ${i}` }],
        max_tokens: 12,
        stream: true,
      });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      finished++;
      return { text, finish };
    });
    await until('4 legs in flight on u1', async () => (await instance(c1, 'u1'))?.in_flight === 4);
    // A second instance for the new work.
    expect(
      (await mgmt(c1, 'POST', '/v1/instances', { id: 'u2', role: 'union', url: s2.url, mode: 'direct' }))
        .status,
    ).toBe(201);
    await until('u2 routable on c1', async () => (await instance(c1, 'u2'))?.routable);

    const drained = mgmt(c1, 'POST', '/v1/instances/u1/drain', { wait_ms: 60_000 });
    await until('u1 draining on c1', async () => (await instance(c1, 'u1'))?.state === 'draining');
    expect(finished).toBe(0); // the drain met running streams
    const s1Before = await seen(s1);
    const s2Before = await seen(s2);
    for (let i = 0; i < 3; i++) {
      const r = await c1.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `after drain ${i}` }],
        max_tokens: 2,
      });
      expect(r.choices[0]!.finish_reason).toBe('length');
    }
    expect(await seen(s1)).toBe(s1Before);
    expect(await seen(s2)).toBe(s2Before + 3);

    const results = await Promise.all(streams);
    for (const r of results) {
      expect(r.finish).toBe('length');
      expect(r.text.length).toBeGreaterThan(0);
    }
    const answer = await drained;
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ id: 'u1', state: 'draining', drained: true, in_flight: 0 });
    const ledger = (await http(s1.url, 'GET', '/debug/requests?wait_idle_ms=10000')).json as {
      finished: Array<{ outcome: string }>;
    };
    expect(ledger.finished.slice(-4).map((f) => f.outcome)).toEqual(Array(4).fill('completed'));
    await http(s1.url, 'DELETE', '/debug/faults');
    expect((await mgmt(c1, 'POST', '/v1/instances/u1/resume')).json.state).toBe('active');
  });

  it('an instance that refuses connections leaves the routable set of both replicas and returns when healthy', async () => {
    await until('u1 routable on c2', async () => (await instance(c2, 'u1'))?.routable);
    await http(s1.url, 'POST', '/debug/faults', { refuse_connections: -1 });
    for (const c of [c1, c2]) {
      const v = await until('u1 unhealthy', async () => {
        const view = await instance(c, 'u1');
        return view && !view.routable ? view : undefined;
      });
      expect(v.health.status).toBe('unhealthy');
    }
    // Work goes to u2 meanwhile.
    const r = await c2.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'while u1 is down' }],
      max_tokens: 2,
    });
    expect(r.choices[0]!.finish_reason).toBe('length');
    await http(s1.url, 'DELETE', '/debug/faults');
    for (const c of [c1, c2])
      await until('u1 routable again', async () => (await instance(c, 'u1'))?.routable);
  });

  it('management API: 401/403, validation errors naming the field, 404, refresh messages', async () => {
    const none = await http(c1.mgmt, 'GET', '/v1/instances');
    expect(none.status).toBe(401);
    expect(none.json.error.code).toBe('unauthorized');
    expect(
      (await http(c1.mgmt, 'GET', '/v1/instances', undefined, { authorization: 'Bearer wrong' })).status,
    ).toBe(403);
    const bad = await mgmt(c1, 'POST', '/v1/instances', { id: 'x', role: 'both', url: s1.url });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ param: 'role', type: 'invalid_request_error' });
    const unknownField = await mgmt(c1, 'POST', '/v1/instances', {
      id: 'x',
      role: 'union',
      url: s1.url,
      colour: 1,
    });
    expect(unknownField.status).toBe(400);
    expect(unknownField.json.error.param).toBe('colour');
    expect((await mgmt(c1, 'POST', '/v1/instances', '{not json')).status).toBe(400);
    expect((await mgmt(c1, 'POST', '/v1/instances/nope/drain')).status).toBe(404);
    expect((await mgmt(c1, 'DELETE', '/v1/instances/nope')).status).toBe(404);

    const add = await mgmt(c1, 'POST', '/instances/refresh', {
      event: 'add',
      instances: [{ instance_id: 7, role: 'union', url: s2.url, mode: 'direct' }],
    });
    expect(add.json).toMatchObject({ event: 'add', applied: ['7'] });
    await until('7 on c2', () => instance(c2, '7'), 5_000);
    const badRefresh = await mgmt(c1, 'POST', '/instances/refresh', {
      event: 'add',
      instances: [{ role: 'x' }],
    });
    expect(badRefresh.status).toBe(400);
    const del = await mgmt(c2, 'POST', '/instances/refresh', { event: 'del', instances: [7, 8] });
    expect(del.json).toMatchObject({ removed: ['7'], not_found: ['8'] });
    await until(
      '7 gone from c1',
      async () => ((await instance(c1, '7')) === undefined ? true : undefined),
      5_000,
    );
  });
});
