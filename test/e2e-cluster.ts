import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import type { SimEngine } from '../src/simulator/engine-profiles.js';
import { http, idleLedger, type LedgerSnapshot } from '../src/simulator/testing/index.js';

/** Loopback clusters for the coordinator's end-to-end tests: `motor sim` processes, optional engine proxies, a coordinator. */

export interface SimSpec {
  role: 'prefill' | 'decode' | 'union';
  engine?: SimEngine;
  args?: string[];
}

export const MODEL = 'motor-sim-7b';
/** `kvTransferConfig` of vLLM instances with the handoff (NIXL) and the layer-wise trigger (Mooncake) connector. */
export const NIXL = { kv_connector: 'NixlConnector' };
export const LAYERWISE = { kv_connector: 'MooncakeLayerwiseConnector' };

/** Generous: the full suite starts many processes at once on two cores. */
const SPAWN_TIMEOUT_MS = 60_000;

/** Every process this file started, so a failed `beforeAll` leaks nothing (see `stopAllSpawned`). */
const spawned = new Set<MotorChild>();

async function spawnTracked(args: string[]): Promise<MotorChild> {
  const child = await spawnMotor(args, { timeoutMs: SPAWN_TIMEOUT_MS });
  spawned.add(child);
  return child;
}

/** Stops whatever is still running (idempotent). */
export async function stopAllSpawned(): Promise<void> {
  await Promise.all([...spawned].map((c) => c.stop()));
  spawned.clear();
}

export async function startSim(spec: SimSpec): Promise<MotorChild> {
  return spawnTracked([
    'sim',
    '--port',
    '0',
    '--role',
    spec.role,
    '--engine',
    spec.engine ?? 'vllm',
    '--time-scale',
    '0.2',
    // SGLang prefills bind a bootstrap server (default 8998): any free port, so clusters can coexist.
    ...(spec.engine === 'sglang' && spec.role === 'prefill' ? ['--bootstrap-port', '0'] : []),
    ...(spec.args ?? []),
  ]);
}

export interface CoordinatorHandle {
  child: MotorChild;
  url: string;
  client: OpenAI;
  stop(): Promise<void>;
}

export async function startCoordinatorProcess(config: Record<string, unknown>): Promise<CoordinatorHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'motor-coord-'));
  const file = join(dir, 'motor.yaml');
  await writeFile(
    file,
    stringify({ ...config, server: { port: 0, ...(config.server as Record<string, unknown> | undefined) } }),
  );
  const child = await spawnTracked(['coordinator', '--config', file]);
  const client = new OpenAI({ baseURL: `${child.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
  return {
    child,
    url: child.url,
    client,
    async stop() {
      await child.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** Inference requests an engine received (oldest first). */
export async function recorded(sim: { url: string }): Promise<Recorded[]> {
  const r = await http(sim.url, 'GET', '/debug/recorded');
  return (r.json as Recorded[]).filter(
    (e) => e.path === '/v1/chat/completions' || e.path === '/v1/completions',
  );
}

export async function resetSim(sim: { url: string }): Promise<void> {
  await Promise.all([
    http(sim.url, 'DELETE', '/debug/recorded'),
    http(sim.url, 'DELETE', '/debug/faults'),
    http(sim.url, 'DELETE', '/debug/requests'),
  ]);
}

export async function setFaults(sim: { url: string }, faults: Record<string, unknown>): Promise<void> {
  const r = await http(sim.url, 'POST', '/debug/faults', faults);
  if (r.status !== 200) throw new Error(`setting faults failed: ${r.text}`);
}

/** Awaits every sim's ledger going idle and returns the snapshots (nothing may be left running). */
export async function settledLedgers(sims: { url: string }[]): Promise<LedgerSnapshot[]> {
  return Promise.all(sims.map((s) => idleLedger(s.url, 10_000)));
}

/** Engine request id a recorded request carries (body request_id / rid, or X-Request-Id). */
export function engineIdOf(r: Recorded): string | undefined {
  return r.body?.request_id ?? r.body?.rid ?? r.headers['x-request-id'];
}

/** Raw POST returning status, headers and text (for exact SSE framing and error bodies). */
export async function rawPost(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return http(base, 'POST', path, body, headers);
}

/** Retries an assertion until it passes or `timeoutMs` elapses (for effects that are fire-and-forget). */
export async function eventually(check: () => Promise<void>, timeoutMs = 3_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

/** `motor engine-proxy` in front of a sim; `engineConfig` null for a union engine. */
export async function startEngineProxy(
  sim: { url: string },
  role: string,
  engineConfig: Record<string, unknown> | null,
): Promise<MotorChild> {
  const args = ['engine-proxy', '--engine-url', sim.url, '--role', role, '--port', '0'];
  args.push('--peer-allow', 'http://127.0.0.1:*');
  let dir: string | null = null;
  if (engineConfig) {
    dir = await mkdtemp(join(tmpdir(), 'motor-proxy-'));
    const file = join(dir, 'engine.json');
    await writeFile(file, JSON.stringify(engineConfig));
    args.push('--engine-config', file);
  }
  const child = await spawnTracked(args);
  const stop = child.stop;
  child.stop = async (killAfterMs?: number) => {
    await stop(killAfterMs);
    if (dir) await rm(dir, { recursive: true, force: true });
  };
  return child;
}
