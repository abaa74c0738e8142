import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from '../src/coordinator/coordinator.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { http, post, sseEvents } from '../src/simulator/testing/index.js';

/**
 * The production KV-load watch, in process: a vLLM NIXL prefill and decode simulator behind a
 * coordinator (direct mode). While the decode loads the KV it is handed, `/ready` names no degraded
 * pair; once it is told to ignore that KV and recompute (fault `ignore_remote_kv`, the silent P/D
 * failure), a few requests later the pair is degraded on `/ready` (still 200) and counted as
 * `not_loaded` in `motor_kv_load_total`.
 */

const MODEL = 'motor-sim-7b';
const log = createLogger('kv-load-watch-test', 'silent');
let prefill: RunningSimulator;
let decode: RunningSimulator;
let coordinator: RunningCoordinator;

beforeAll(async () => {
  const start = (role: 'prefill' | 'decode') =>
    startSimulator({ role, timeScale: 0, model: MODEL, kvConnector: 'NixlConnector' }, log);
  [prefill, decode] = await Promise.all([start('prefill'), start('decode')]);
  const instance = (id: string, sim: RunningSimulator, role: 'prefill' | 'decode') => ({
    id,
    url: sim.url,
    role,
    mode: 'direct',
    models: [MODEL],
    kvTransferConfig: { kv_connector: 'NixlConnector' },
  });
  coordinator = await startCoordinator(
    validateCoordinatorConfig({
      server: { port: 0 },
      instances: [instance('P', prefill, 'prefill'), instance('D', decode, 'decode')],
      health: { intervalMs: 0 },
      observability: { accessLog: false },
      management: { port: null },
    }),
    log,
  );
}, 60_000);

afterAll(async () => {
  await coordinator?.close();
  await Promise.all([prefill?.close(), decode?.close()]);
});

let n = 0;
/** A prompt no earlier request shares (the decode's own prefix cache must not answer for the KV). */
const freshPrompt = (): string => `request ${++n}: ${'tell me about disaggregated serving. '.repeat(20)}`;

async function complete(stream: boolean): Promise<void> {
  const body = {
    model: MODEL,
    prompt: freshPrompt(),
    max_tokens: 3,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  };
  const r = await post(coordinator.url, '/v1/completions', body);
  expect(r.status).toBe(200);
  if (stream) expect(sseEvents(r.text).at(-1)).toBe('[DONE]');
}

const kvLoadCount = async (verdict: string): Promise<number> => {
  const text = (await http(coordinator.url, 'GET', '/metrics')).text;
  const line = text
    .split('\n')
    .find((l) => l.startsWith('motor_kv_load_total{') && l.includes(`verdict="${verdict}"`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
};

describe('kv_not_loaded watch', () => {
  it('loaded KV: counted as loaded, no degraded pair', async () => {
    await complete(false);
    await complete(true);
    await complete(false);
    expect(await kvLoadCount('loaded')).toBe(3);
    const ready = await http(coordinator.url, 'GET', '/ready');
    expect(ready.status).toBe(200);
    expect(ready.json.degraded).toBeUndefined();
  });

  it('a decode that recomputes: not_loaded per request, the pair degraded on /ready within a few requests', async () => {
    expect((await post(decode.url, '/debug/faults', { ignore_remote_kv: true })).status).toBe(200);
    for (let i = 0; i < 3; i++) await complete(i % 2 === 1);
    expect(await kvLoadCount('not_loaded')).toBe(3);
    const ready = await http(coordinator.url, 'GET', '/ready');
    expect(ready.status).toBe(200); // degraded, still serving
    expect(ready.json.ready).toBe(true);
    expect(ready.json.degraded['P → D']).toMatch(/kv_not_loaded in 3 of the last 6 .*motor verify/);
  });
});
