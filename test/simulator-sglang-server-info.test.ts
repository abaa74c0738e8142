import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngineFixture } from './fixtures/engines/load.js';
import { createLogger } from '../src/common/logger.js';
import { parseSglangServerInfo } from '../src/engine-adapters/sglang-server-info.js';
import type { SimRole } from '../src/simulator/options.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { SIM_SGLANG_VERSION } from '../src/simulator/sglang-server-info.js';
import { http } from '../src/simulator/testing/index.js';

const log = createLogger('test', 'silent');

describe('SGLang GET /server_info round-trips through the coordinator’s parser', () => {
  const sims = new Map<SimRole, RunningSimulator>();
  beforeAll(async () => {
    for (const role of ['prefill', 'decode', 'union'] as const)
      sims.set(
        role,
        await startSimulator({ port: 0, engine: 'sglang', role, bootstrapPort: 0, model: 'qwen' }, log),
      );
  });
  afterAll(async () => {
    await Promise.all([...sims.values()].map((s) => s.close()));
  });

  it.each([
    ['prefill', 'prefill'],
    ['decode', 'decode'],
    ['union', null],
  ] as const)('%s → disaggregation_mode %s', async (role, mode) => {
    const sim = sims.get(role)!;
    for (const path of ['/server_info', '/get_server_info']) {
      const r = await http(sim.url, 'GET', path);
      expect(r.status).toBe(200);
      const info = parseSglangServerInfo(r.json);
      expect(info).toEqual({
        disaggregationMode: mode,
        // the prefill reports its bound port; the others their configured one (0 here: not a port)
        bootstrapPort: role === 'prefill' ? sim.bootstrapPort : null,
        model: 'qwen',
        version: SIM_SGLANG_VERSION,
        rustFrontend: false,
      });
    }
  });

  it('has the fixture’s keys, flat, with SGLang’s own "null" mode string for union', async () => {
    const fixture = loadEngineFixture('sglang/server/server-info.json').body as Record<string, unknown>;
    const r = await http(sims.get('union')!.url, 'GET', '/server_info');
    const keys = Object.keys(fixture).filter((k) => k !== 'api_key' && k !== 'admin_api_key');
    expect(Object.keys(r.json)).toEqual(expect.arrayContaining(keys));
    expect(r.json.disaggregation_mode).toBe('null');
  });

  it('a vLLM simulator has no /server_info', async () => {
    const v = await startSimulator({ port: 0 }, log);
    try {
      expect((await http(v.url, 'GET', '/server_info')).status).toBe(404);
    } finally {
      await v.close();
    }
  });
});

describe('/metrics names per engine (fixtures)', () => {
  const seriesNames = (prom: string): string[] =>
    prom
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => l.split(/[{ ]/)[0]!);

  it.each([
    ['vllm', 'vllm/openai/metrics.prom', 'sglang:'],
    ['sglang', 'sglang/server/metrics.prom', 'vllm:'],
  ] as const)('%s exposes every gauge of %s and none of the other family', async (engine, fixture, other) => {
    const sim = await startSimulator({ port: 0, engine, timeScale: 0 }, log);
    try {
      const text = (await http(sim.url, 'GET', '/metrics')).text;
      const have = new Set(seriesNames(text));
      for (const name of seriesNames(loadEngineFixture(fixture).body as string)) expect(have).toContain(name);
      expect(text).not.toContain(other);
      if (engine === 'sglang') expect(text).toMatch(/^sglang:token_usage\{model_name="motor-sim-7b"\} 0$/m);
    } finally {
      await sim.close();
    }
  });
});
