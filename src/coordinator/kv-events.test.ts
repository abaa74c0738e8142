import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { validateCoordinatorConfig } from '../config/coordinator-config.js';
import { startSimulator } from '../simulator/server.js';
import { post } from '../simulator/testing.js';
import { startCoordinator } from './coordinator.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const log = createLogger('kv-events-wiring-test', 'silent');

function config(instances: unknown[]) {
  return validateCoordinatorConfig({
    server: { port: 0 },
    instances,
    health: { intervalMs: 0 },
    observability: { accessLog: false },
    management: { port: null },
  });
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
    // The subscription takes effect asynchronously: store prompts until one reaches the index.
    for (let i = 0; hub.index.blocksOf('e0') === 0 && i < 500; i++) {
      const r = await post(sim.url, '/v1/completions', {
        model: 'motor-sim-7b',
        prompt: Array.from({ length: 9 }, (_, k) => 100 * i + k),
        max_tokens: 1,
      });
      expect(r.status).toBe(200);
    }
    expect(hub.index.blocksOf('e0')).toBeGreaterThan(0);
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
});
