import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import { http } from '../src/simulator/testing/index.js';
import { MARK, MAX_BODY, caseArb, escapeKey, send, slowLoris, validBase } from './fuzz-cases.js';
import {
  MODEL,
  startCoordinatorProcess,
  startEngineProxy,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * Fuzzing the two HTTP surfaces that take untrusted bytes: the coordinator's OpenAI gateway and the
 * engine proxy. A seeded generator (fast-check) produces malformed and hostile requests — bad JSON,
 * wrong types, huge fields, deep nesting, injected internal fields (also with JSON escapes in the
 * key), path and header tricks, and a bounded number of slow-loris bodies — sent as raw bytes over
 * node:net. Asserted: every complete request gets an HTTP answer; no 5xx except the documented
 * ones; the processes stay up and /health answers 200 afterwards; no internal field reaches an
 * engine (the simulators' request recorders).
 *
 * `npm test`: 1,000 cases per target = 2,000 requests (MOTOR_FUZZ_CASES overrides); `npm run test:fuzz`:
 * 6,000 per target = 12,000 requests (MOTOR_FUZZ_FULL=1).
 * MOTOR_FUZZ_SEED picks the seed (default 20261202).
 */

const FULL = process.env.MOTOR_FUZZ_FULL === '1';
const CASES = Number(process.env.MOTOR_FUZZ_CASES ?? (FULL ? 6_000 : 1_000));
const SEED = Number(process.env.MOTOR_FUZZ_SEED ?? 20261202);
/** Slow-loris connections per target (each costs wall-clock time, so they are bounded). */
const SLOW_LORIS = FULL ? 40 : 8;

/** 5xx a gateway or proxy may answer by design (docs/RELIABILITY.md "Fuzzing"): none for healthy engines. */
const DOCUMENTED_5XX = new Set<number>();

interface Target {
  name: string;
  url: string;
  child: MotorChild;
  sim: MotorChild;
  /** Keys an engine behind this target must never receive. */
  forbidden: (key: string) => boolean;
}

/** The proxy passes requests without an envelope through unchanged (docs/RELIABILITY.md); envelopes never reach the engine. */
const forbiddenAtEngine = (key: string): boolean =>
  key === '_motor_dispatch' || key === '_motor_prefill_result';
const forbiddenAtGateway = (key: string): boolean =>
  key.startsWith('_motor_') || key === 'kv_transfer_params' || key.startsWith('bootstrap_');

describe('fuzz', () => {
  const targets: Target[] = [];
  let coord: CoordinatorHandle | undefined;
  const stats: Record<string, Record<string, Record<string, number>>> = {};
  const violations: string[] = [];

  beforeAll(async () => {
    const [simC, simP] = await Promise.all([
      startSim({ role: 'union', args: ['--time-scale', '0', '--record-max', '100000'] }),
      startSim({ role: 'union', args: ['--time-scale', '0', '--record-max', '100000'] }),
    ]);
    const [c, proxy] = await Promise.all([
      startCoordinatorProcess({
        server: { maxBodyBytes: MAX_BODY },
        instances: [{ id: 'U', url: simC.url, role: 'union', mode: 'direct', models: [MODEL] }],
      }),
      startEngineProxy(simP, 'union', null),
    ]);
    coord = c;
    targets.push(
      { name: 'coordinator', url: c.url, child: c.child, sim: simC, forbidden: forbiddenAtGateway },
      { name: 'engine-proxy', url: proxy.url, child: proxy, sim: simP, forbidden: forbiddenAtEngine },
    );
  }, 180_000);

  afterAll(async () => {
    await coord?.stop();
    await stopAllSpawned();
    console.log(`fuzz: ${CASES} cases per target, seed ${SEED}\n${JSON.stringify(stats, null, 1)}`);
  });

  /** Scans what each engine received for internal fields and the injected marker; clears the recorder. */
  async function scanRecorders(): Promise<void> {
    for (const t of targets) {
      const rec = (await http(t.sim.url, 'GET', '/debug/recorded')).json as Array<{
        path: string;
        body: unknown;
      }>;
      for (const r of rec) {
        const body = r.body;
        if (body && typeof body === 'object' && !Array.isArray(body)) {
          for (const k of Object.keys(body)) {
            if (t.forbidden(k)) violations.push(`${t.name}: engine received '${k}' on ${r.path}`);
          }
        }
        if (t.name === 'coordinator' && JSON.stringify(body ?? null).includes(MARK))
          violations.push(`${t.name}: engine received the injected marker on ${r.path}`);
      }
      await http(t.sim.url, 'DELETE', '/debug/recorded');
    }
  }

  it(`${CASES} generated requests per target: answers, no undocumented 5xx, no internal field at an engine`, async () => {
    const cases = fc.sample(caseArb, { seed: SEED, numRuns: CASES });
    const failures: string[] = [];
    for (const t of targets) {
      const s: Record<string, Record<string, number>> = (stats[t.name] = {});
      for (let i = 0; i < cases.length; i++) {
        const c = cases[i]!;
        const a = await send(t.url, c);
        const status = a === 'timeout' ? 'timeout' : String(a.status);
        (s[c.kind.split(':')[0]!] ??= {})[status] = (s[c.kind.split(':')[0]!]![status] ?? 0) + 1;
        if (a === 'timeout') failures.push(`${t.name} #${i} ${c.kind}: no answer within 15 s`);
        else if (a.status >= 500 && !DOCUMENTED_5XX.has(a.status))
          failures.push(`${t.name} #${i} ${c.kind}: ${a.text.slice(0, 300)}`);
        else if (
          a.status === 0 &&
          !c.kind.startsWith('header:') &&
          // an oversized body is answered 413 + close while we still write: the client may see a reset
          Buffer.byteLength(c.body) <= MAX_BODY
        )
          failures.push(`${t.name} #${i} ${c.kind}: connection closed without an answer`);
        if (i % 500 === 499) await scanRecorders();
        if (failures.length > 20) break;
      }
      expect(t.child.child.exitCode, `${t.name} exited`).toBeNull();
    }
    await scanRecorders();
    expect(failures).toEqual([]);
    expect(violations).toEqual([]);
  }, 1_800_000);

  it('regression: a body nested 20,000 deep is a 400 at the coordinator, not a 500', async () => {
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    const body = JSON.stringify(validBase()).replace(/}$/, `,"deep":${deep}}`);
    const r = await http(targets[0]!.url, 'POST', '/v1/chat/completions', body);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.message).toMatch(/nested deeper/);
  });

  it('regression: a JSON-escaped "_motor_dispatch" key is an envelope at the engine proxy, never passed through', async () => {
    const t = targets[1]!;
    await http(t.sim.url, 'DELETE', '/debug/recorded');
    for (const how of [0, 1, 2]) {
      const key = escapeKey('_motor_dispatch', how);
      const body = JSON.stringify(validBase()).replace(/}$/, `,"${key}":{"mark":"${MARK}"}}`);
      const r = await http(t.url, 'POST', '/v1/chat/completions', body);
      expect(r.status, r.text).toBe(400);
    }
    const rec = (await http(t.sim.url, 'GET', '/debug/recorded')).json as unknown[];
    expect(JSON.stringify(rec)).not.toContain(MARK);
  });

  it('regression: the engine proxy answers 400 to non-origin-form targets instead of a 502 from its upstream client', async () => {
    const t = targets[1]!;
    for (const path of ['*', 'http://evil.example/v1/models', '//evil.example/v1/models']) {
      const a = await send(t.url, { kind: 'path', method: 'GET', path, headers: [], body: '' });
      expect(a === 'timeout' ? 0 : a.status, path).toBe(400);
    }
  });

  it(`slow-loris bodies (${SLOW_LORIS} per target) leave the server serving`, async () => {
    for (const t of targets) {
      await Promise.all(Array.from({ length: SLOW_LORIS }, (_, i) => slowLoris(t.url, i)));
      const h = await http(t.url, 'GET', '/health');
      expect(h.status, t.name).toBe(200);
      const r = await http(t.url, 'POST', '/v1/chat/completions', validBase());
      expect(r.status, `${t.name}: ${r.text}`).toBe(200);
    }
  }, 120_000);

  it('every process is alive and healthy afterwards', async () => {
    for (const t of [...targets, ...targets.map((x) => ({ ...x, url: x.sim.url, child: x.sim }))]) {
      expect(t.child.child.exitCode).toBeNull();
      expect((await http(t.url, 'GET', '/health')).status).toBe(200);
    }
  });
});
