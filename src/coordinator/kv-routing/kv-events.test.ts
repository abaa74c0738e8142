import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startSimulator } from '../../simulator/server.js';
import { post } from '../../simulator/testing/index.js';
import type { KvEventsHub } from '../../kv-events/kv-events-hub.js';
import { startCoordinator } from '../coordinator.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const log = createLogger('kv-events-wiring-test', 'silent');

function config(instances: unknown[], management: { port: number | null } = { port: null }) {
  return validateCoordinatorConfig({
    server: { port: 0 },
    instances,
    health: { intervalMs: 0 },
    observability: { accessLog: false },
    management,
  });
}

/** Stores fresh prompts on `simUrl` until `id` has blocks in the hub's index (subscriptions join asynchronously). */
async function storeUntilIndexed(hub: KvEventsHub, id: string, simUrl: string): Promise<void> {
  for (let i = 0; hub.index.blocksOf(id) === 0 && i < 500; i++) {
    const r = await post(simUrl, '/v1/completions', {
      model: 'motor-sim-7b',
      prompt: Array.from({ length: 9 }, (_, k) => 100 * i + k),
      max_tokens: 1,
    });
    expect(r.status).toBe(200);
  }
  expect(hub.index.blocksOf(id)).toBeGreaterThan(0);
}

describe('coordinator: KV events wiring', () => {
  it('no instance sets kvEvents: no hub', async () => {
    const c = await startCoordinator(config([{ id: 'e0', url: 'http://127.0.0.1:9', role: 'union' }]), log);
    closers.push(() => c.close());
    expect(c.kvEvents).toBeNull();
    const state = (await (await fetch(`${c.url}/dashboard/api/state`)).json()) as { kvEvents: unknown };
    expect(state.kvEvents).toBeNull();
  });

  it("subscribes an instance's publisher and shows the index on /metrics", async () => {
    const sim = await startSimulator(
      { timeScale: 0, blockSize: 4, kvEventsEndpoint: 'tcp://127.0.0.1:*' },
      log,
    );
    closers.push(() => sim.close());
    const c = await startCoordinator(
      config([
        {
          id: 'e0',
          url: sim.url,
          role: 'union',
          mode: 'direct',
          kvEvents: { endpoint: sim.kvEvents!.endpoint },
        },
      ]),
      log,
    );
    closers.push(() => c.close());
    const hub = c.kvEvents!;
    await storeUntilIndexed(hub, 'e0', sim.url);
    const metrics = await (await fetch(`${c.url}/metrics`)).text();
    expect(metrics).toMatch(/^motor_kv_index_blocks\{instance="e0"\} [1-9]/m);
    expect(metrics).toMatch(/^motor_kv_events_total\{instance="e0",kind="stored"\} [1-9]/m);
    const state = (await (await fetch(`${c.url}/dashboard/api/state`)).json()) as {
      kvEvents: { instances: Array<{ instance: string; blocks: number; lastSeq: string }> };
    };
    expect(state.kvEvents.instances).toEqual([
      expect.objectContaining({
        instance: 'e0',
        blocks: hub.index.blocksOf('e0'),
        lastSeq: expect.any(String),
      }),
    ]);
  });

  it('subscribes instances registered through the management API with kv_events, and drops them on removal', async () => {
    const sims = await Promise.all(
      [0, 1].map(() =>
        startSimulator({ timeScale: 0, blockSize: 4, kvEventsEndpoint: 'tcp://127.0.0.1:*' }, log),
      ),
    );
    for (const sim of sims) closers.push(() => sim.close());
    const c = await startCoordinator(
      config(
        [
          {
            id: 'e0',
            url: sims[0]!.url,
            role: 'union',
            mode: 'direct',
            kvEvents: { endpoint: sims[0]!.kvEvents!.endpoint },
          },
        ],
        { port: 0 },
      ),
      log,
    );
    closers.push(() => c.close());
    const hub = c.kvEvents!;
    const registered = await fetch(`${c.managementUrl!}/v1/instances`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: 'e1',
        role: 'union',
        url: sims[1]!.url,
        mode: 'direct',
        dispatch_capabilities: [],
        kv_events: { endpoint: sims[1]!.kvEvents!.endpoint },
      }),
    });
    expect(registered.status).toBe(201);
    expect(
      hub
        .status()
        .map((s) => s.instance)
        .sort(),
    ).toEqual(['e0', 'e1']);
    await storeUntilIndexed(hub, 'e1', sims[1]!.url);
    expect((await fetch(`${c.managementUrl!}/v1/instances/e1`, { method: 'DELETE' })).status).toBe(200);
    expect(hub.status().map((s) => s.instance)).toEqual(['e0']);
    expect(hub.index.blocksOf('e1')).toBe(0);
  });
});
