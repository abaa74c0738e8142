import { afterAll, describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import { verifyEngines } from '../src/engine-verify/verify.js';
import type { VerifyCheck, VerifyReport } from '../src/engine-verify/verify-result.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import type { SimOptions } from '../src/simulator/options.js';
import { createLogger } from '../src/common/logger.js';

/**
 * `motor verify` against simulators on loopback: every simulator profile (each read from upstream,
 * test/fixtures/engines/README.md) reports no drift, and simulators told to behave wrongly (a decode
 * that recomputes, a prefill answering other keys, a mode or key the config does not name) report
 * the drift with its fact.
 */

const running: RunningSimulator[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.close()));
});

async function sim(opts: Partial<SimOptions>): Promise<RunningSimulator> {
  const s = await startSimulator(
    { host: '127.0.0.1', port: 0, timeScale: 0, bootstrapPort: 0, ...opts },
    createLogger('test', 'silent'),
  );
  running.push(s);
  return s;
}

interface PairSpec {
  sim: Partial<SimOptions>;
  prefill?: Partial<SimOptions>;
  decode?: Partial<SimOptions>;
  /** The instance config both get (engine kind, connector, keys). */
  instance: Record<string, unknown>;
}

async function verifyPair(spec: PairSpec): Promise<VerifyReport> {
  const p = await sim({ ...spec.sim, role: 'prefill', ...spec.prefill });
  const d = await sim({ ...spec.sim, role: 'decode', ...spec.decode });
  const config = validateCoordinatorConfig({
    instances: [
      { id: 'p', url: p.url, role: 'prefill', mode: 'direct', ...spec.instance },
      { id: 'd', url: d.url, role: 'decode', mode: 'direct', ...spec.instance },
    ],
  });
  return verifyEngines(config, {
    probesPerPair: 2,
    maxTokens: 4,
    timeoutMs: 20_000,
    metaserverHost: '127.0.0.1',
    motorVersion: 'test',
  });
}

const row = (r: VerifyReport, target: string, check: VerifyCheck['check']): VerifyCheck =>
  r.checks.find((c) => c.target === target && c.check === check)!;
const PAIR = 'p → d';
const verdicts = (r: VerifyReport): string[] => r.checks.map((c) => `${c.target} ${c.check} ${c.verdict}`);

const handoff = (engine: 'vllm' | 'vllm-ascend', version: string, connector: string): PairSpec => ({
  sim: { engine, engineVersion: version, kvConnector: connector },
  instance: { engine: 'vllm', kvTransferConfig: { kv_connector: connector } },
});
const layerwise = (version: string): PairSpec => ({
  sim: { engine: 'vllm-ascend', engineVersion: version, kvConnector: 'MooncakeLayerwiseConnector' },
  instance: { engine: 'vllm', kvTransferConfig: { kv_connector: 'MooncakeLayerwiseConnector' } },
});

describe('motor verify: every simulator profile is ok', () => {
  it.each<[string, PairSpec, VerifyCheck['check'][]]>([
    ['vllm nixl-newest', handoff('vllm', 'nixl-newest', 'NixlConnector'), ['handoff_params', 'eos_handover']],
    [
      'vllm nixl-newest as NixlPullConnector',
      handoff('vllm', 'nixl-newest', 'NixlPullConnector'),
      ['handoff_params'],
    ],
    ['vllm nixl-push', handoff('vllm', 'nixl-push', 'NixlPushConnector'), ['handoff_params', 'eos_handover']],
    [
      'vllm nixl-2026-01, a model ending on EOS at once',
      {
        ...handoff('vllm', 'nixl-2026-01', 'NixlConnector'),
        sim: { engine: 'vllm', engineVersion: 'nixl-2026-01', eosAt: 1 },
      },
      ['handoff_params', 'eos_handover'],
    ],
    ...(['main', 'v0.18', 'v0.15', 'v0.14', 'v0.13'] as const).map(
      (v): [string, PairSpec, VerifyCheck['check'][]] => [
        `vllm-ascend ${v} MooncakeConnectorV1`,
        handoff('vllm-ascend', v, 'MooncakeConnectorV1'),
        ['handoff_params', 'eos_handover'],
      ],
    ),
    [
      'vllm-ascend main MooncakeHybridConnector',
      handoff('vllm-ascend', 'main', 'MooncakeHybridConnector'),
      ['handoff_params'],
    ],
    ...(['main', 'v0.17', 'v0.15', 'v0.14', 'v0.13'] as const).map(
      (v): [string, PairSpec, VerifyCheck['check'][]] => [
        `vllm-ascend ${v} layer-wise`,
        layerwise(v),
        ['metaserver_call'],
      ],
    ),
    ['sglang (Python server)', { sim: { engine: 'sglang' }, instance: { engine: 'sglang' } }, ['bootstrap']],
    [
      'sglang Rust server (bootstrap on the HTTP port)',
      { sim: { engine: 'sglang', engineVersion: 'rust-server' }, instance: { engine: 'sglang' } },
      ['bootstrap'],
    ],
    [
      'vllm nixl-newest with --api-key',
      {
        ...handoff('vllm', 'nixl-newest', 'NixlConnector'),
        sim: { engine: 'vllm', apiKey: 'k1' },
        instance: { engine: 'vllm', kvTransferConfig: { kv_connector: 'NixlConnector' }, apiKey: 'k1' },
      },
      ['handoff_params'],
    ],
  ])('%s', async (_name, spec, flowChecks) => {
    const r = await verifyPair(spec);
    expect(r.drift, verdicts(r).join('\n')).toBe(false);
    for (const check of ['kv_loaded', ...flowChecks] as const) expect(row(r, PAIR, check).verdict).toBe('ok');
    for (const id of ['p', 'd']) {
      expect(row(r, id, 'auth').verdict).toBe('ok');
      expect(row(r, id, 'metrics').verdict).toBe('ok');
    }
  });
});

describe('motor verify: a wrong engine is drift, with its fact', () => {
  it('a decode that recomputes the prompt (fault ignore_remote_kv) → kv_loaded drift', async () => {
    const r = await verifyPair({
      ...handoff('vllm', 'nixl-newest', 'NixlConnector'),
      decode: { faults: { ignore_remote_kv: true } },
    });
    expect(row(r, PAIR, 'kv_loaded')).toMatchObject({ verdict: 'drift', fact: 46 });
    expect(row(r, PAIR, 'kv_loaded').seen).toMatch(/recomputed/);
    expect(row(r, PAIR, 'handoff_params').verdict).toBe('ok');
    expect(r.drift).toBe(true);
  });

  it('a SGLang decode that recomputes → kv_loaded drift', async () => {
    const r = await verifyPair({
      sim: { engine: 'sglang' },
      instance: { engine: 'sglang' },
      decode: { faults: { ignore_remote_kv: true } },
    });
    expect(row(r, PAIR, 'kv_loaded').verdict).toBe('drift');
  });

  it('a prefill answering without remote_request_id (fault drop_kv_params) → handoff_params drift, fact 14', async () => {
    const r = await verifyPair({
      ...handoff('vllm', 'nixl-newest', 'NixlConnector'),
      prefill: { faults: { drop_kv_params: ['remote_request_id'] } },
    });
    expect(row(r, PAIR, 'handoff_params')).toMatchObject({ verdict: 'drift', fact: 14 });
    expect(row(r, PAIR, 'handoff_params').seen).toContain('remote_request_id: absent');
  });

  it('a Mooncake prefill without last_token_id → drift, fact 25', async () => {
    const r = await verifyPair({
      ...handoff('vllm-ascend', 'v0.18', 'MooncakeConnectorV1'),
      prefill: { faults: { drop_kv_params: ['last_token_id'] } },
    });
    expect(row(r, PAIR, 'handoff_params')).toMatchObject({ verdict: 'drift', fact: 25 });
  });

  it('engines running NixlPushConnector configured as NixlConnector → drift naming the push connector', async () => {
    const r = await verifyPair({
      sim: { engine: 'vllm', engineVersion: 'nixl-push', kvConnector: 'NixlPushConnector' },
      instance: { engine: 'vllm', kvTransferConfig: { kv_connector: 'NixlConnector' } },
    });
    expect(row(r, PAIR, 'handoff_params')).toMatchObject({ verdict: 'drift', fact: 14 });
    expect(row(r, PAIR, 'handoff_params').fix).toContain('NixlPushConnector');
  });

  it('an engine with --api-key the config does not name → auth drift, fact 21', async () => {
    const r = await verifyPair({
      ...handoff('vllm', 'nixl-newest', 'NixlConnector'),
      sim: { engine: 'vllm', apiKey: 'secret' },
    });
    expect(row(r, 'p', 'auth')).toMatchObject({ verdict: 'drift', fact: 21 });
    expect(JSON.stringify(r)).not.toContain('secret');
  });

  it('a configured key the SGLang engine refuses → auth drift, fact 22', async () => {
    const r = await verifyPair({
      sim: { engine: 'sglang', apiKey: 'right' },
      instance: { engine: 'sglang', apiKey: 'wrong' },
    });
    expect(row(r, 'p', 'auth')).toMatchObject({ verdict: 'drift', fact: 22 });
  });
});
