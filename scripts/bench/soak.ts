/**
 * Soak (docs/RELIABILITY.md "Soak"): steady closed-loop load through a `motor up`-like cluster —
 * a handoff P/D pair and a union instance behind one coordinator, all `motor sim` processes — while
 * one sim after another is killed and restarted on its port every `--restart-every` seconds.
 * Every 10 s it samples the coordinator's RSS (/proc) and heap (its /metrics, when exposed), and
 * counts answers: ok, clear errors (HTTP error / SSE error frame + [DONE]), and bad ones (anything
 * else: must stay 0). Pass: RSS of the last third within 10 % of the first third (after warm-up),
 * no growth of the error rate between the first and the second half, no bad answers.
 *
 *   npm run soak -- [--duration 180] [--concurrency 16] [--restart-every 20] [--json out.json]
 * Bounded: --duration is capped at 600 s. Not part of CI.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '180' },
    concurrency: { type: 'string', default: '16' },
    'restart-every': { type: 'string', default: '20' },
    json: { type: 'string' },
  },
});
const durationS = Math.min(600, Number(values.duration));
const concurrency = Number(values.concurrency);
const restartEveryS = Number(values['restart-every']);
const MODEL = 'motor-sim-7b';
const WINDOW_MS = 10_000;

const dir = await mkdtemp(join(tmpdir(), 'motor-soak-'));
const simArgs = (role: string, port: number): string[] => [
  'sim',
  '--port',
  String(port),
  '--role',
  role,
  '--time-scale',
  '0.05',
  '--record-max',
  '0',
  '--ledger-max',
  '0',
];
async function startSim(role: string, port = 0): Promise<MotorChild> {
  for (let i = 0; ; i++) {
    try {
      return await spawnMotor(simArgs(role, port), { timeoutMs: 60_000 });
    } catch (err) {
      if (i >= 20) throw err; // the old process may still hold the port for a moment
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

const sims: Array<{ role: string; child: MotorChild; port: number }> = [];
for (const role of ['prefill', 'decode', 'union']) {
  const child = await startSim(role);
  sims.push({ role, child, port: Number(new URL(child.url).port) });
}
const NIXL = { kv_connector: 'NixlConnector' };
const file = join(dir, 'motor.yaml');
await writeFile(
  file,
  stringify({
    server: { port: 0 },
    instances: [
      {
        id: 'P',
        url: sims[0]!.child.url,
        role: 'prefill',
        mode: 'direct',
        models: [MODEL],
        kvTransferConfig: NIXL,
      },
      {
        id: 'D',
        url: sims[1]!.child.url,
        role: 'decode',
        mode: 'direct',
        models: [MODEL],
        kvTransferConfig: NIXL,
      },
      { id: 'U', url: sims[2]!.child.url, role: 'union', mode: 'direct', models: [MODEL] },
    ],
    // as `motor up` runs it: P/D requests fall back to the union instance while the pair is broken
    dispatch: { fallbackToSingle: true },
    retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 200 },
    timeouts: { firstTokenMs: 10_000, idleMs: 10_000, totalMs: 30_000 },
  }),
);
const coord = await spawnMotor(['coordinator', '--config', file], { timeoutMs: 60_000 });
const pool = new Pool(coord.url, { connections: concurrency });

type Kind = 'ok' | 'error' | 'bad';
let window = { ok: 0, error: 0, bad: 0 };
const badSamples: string[] = [];

async function one(i: number): Promise<Kind> {
  const stream = i % 2 === 0;
  try {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: `soak request ${i % 97} about disaggregated serving` }],
        max_tokens: 16,
        stream,
      }),
    });
    const text = await res.body.text();
    if (res.statusCode >= 400) return /"error":\{"message":/.test(text) ? 'error' : bad(text);
    if (!stream) return /"completion_tokens":16/.test(text) ? 'ok' : bad(text);
    if (!text.endsWith('data: [DONE]\n\n')) return bad(text);
    return text.includes('data: {"error":') ? 'error' : 'ok';
  } catch (err) {
    return bad(`client error ${(err as Error).message}`);
  }
}
function bad(text: string): Kind {
  if (badSamples.length < 5) badSamples.push(text.slice(0, 300));
  return 'bad';
}

const heapBytes = async (): Promise<number | null> => {
  try {
    const r = await pool.request({ method: 'GET', path: '/metrics' });
    const text = await r.body.text();
    const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([\d.e+]+)$/m.exec(text);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
};
const rssMiB = async (): Promise<number> =>
  Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${coord.child.pid}/status`, 'utf8'))![1]) / 1024;

const t0 = Date.now();
const deadline = t0 + durationS * 1000;
let seq = 0;
const workers = Array.from({ length: concurrency }, async () => {
  while (Date.now() < deadline) window[await one(seq++)]++;
});

const samples: Array<{
  t: number;
  rssMiB: number;
  heapMiB: number | null;
  ok: number;
  error: number;
  bad: number;
}> = [];
let restarts = 0;
let nextRestart = t0 + restartEveryS * 1000;
let nextSample = t0 + WINDOW_MS;
try {
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    if (Date.now() >= nextRestart && Date.now() < deadline - 5_000) {
      const s = sims[restarts % sims.length]!;
      await s.child.stop(2_000);
      s.child = await startSim(s.role, s.port);
      restarts++;
      nextRestart = Date.now() + restartEveryS * 1000;
    }
    if (Date.now() >= nextSample) {
      const heap = await heapBytes();
      samples.push({
        t: Math.round((Date.now() - t0) / 1000),
        rssMiB: await rssMiB(),
        heapMiB: heap === null ? null : heap / 2 ** 20,
        ...window,
      });
      const last = samples.at(-1)!;
      console.log(
        `t=${String(last.t).padStart(4)} s  rss ${last.rssMiB.toFixed(1)} MiB  heap ${last.heapMiB?.toFixed(1) ?? 'n/a'} MiB  ` +
          `ok ${last.ok}  errors ${last.error}  bad ${last.bad}  restarts ${restarts}`,
      );
      window = { ok: 0, error: 0, bad: 0 };
      nextSample += WINDOW_MS;
    }
  }
  await Promise.all(workers);

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const measured = samples.slice(Math.min(3, Math.floor(samples.length / 4))); // skip warm-up windows
  const third = Math.max(1, Math.floor(measured.length / 3));
  const rssFirst = median(measured.slice(0, third).map((s) => s.rssMiB));
  const rssLast = median(measured.slice(-third).map((s) => s.rssMiB));
  const half = Math.floor(samples.length / 2);
  const rate = (xs: typeof samples): number =>
    xs.reduce((a, s) => a + s.error, 0) /
    Math.max(
      1,
      xs.reduce((a, s) => a + s.ok + s.error, 0),
    );
  const errFirst = rate(samples.slice(0, half));
  const errSecond = rate(samples.slice(half));
  const totals = samples.reduce(
    (a, s) => ({ ok: a.ok + s.ok, error: a.error + s.error, bad: a.bad + s.bad }),
    {
      ok: 0,
      error: 0,
      bad: 0,
    },
  );
  const memDrift = (rssLast - rssFirst) / rssFirst;
  const pass = Math.abs(memDrift) <= 0.1 && errSecond <= errFirst * 1.5 + 0.005 && totals.bad === 0;
  const summary = {
    durationS,
    concurrency,
    restarts,
    totals,
    rssFirstThirdMiB: rssFirst,
    rssLastThirdMiB: rssLast,
    rssDriftPct: 100 * memDrift,
    errorRateFirstHalfPct: 100 * errFirst,
    errorRateSecondHalfPct: 100 * errSecond,
    badSamples,
    pass,
  };
  console.log(JSON.stringify(summary, null, 2));
  if (values.json) await writeFile(values.json, JSON.stringify({ summary, samples }, null, 2));
  process.exitCode = pass ? 0 : 1;
} finally {
  await pool.close();
  await coord.stop();
  await Promise.all(sims.map((s) => s.child.stop()));
  await rm(dir, { recursive: true, force: true });
}
