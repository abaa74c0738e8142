/**
 * `motor coordinator --workers N` scaling (issue 19), in one run: wrk against a union `motor sim` at
 * time-scale 0 directly, through `--workers 1` (the single-process path) and through `--workers 2`
 * (node:cluster round-robin, and the OS-balanced `NODE_CLUSTER_SCHED_POLICY=none` for comparison).
 * Targets take turns run after run; the median run of each counts. Nothing is pinned: the workers
 * need both cores, so wrk, the sim and the coordinator share them — the CPU columns show where the
 * machine's time went (per process group, from /proc) and so where the scaling stops.
 *   npm run build && npx tsx scripts/bench/workers.ts [--runs 3] [--duration 5] [--connections 64]
 * Prerequisite: wrk (`apt-get install -y wrk`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '64' },
    'max-tokens': { type: 'string', default: '16' },
  },
});
const runs = Number(values.runs);
const durationS = Number(values.duration);
const connections = Number(values.connections);
const MODEL = 'motor-sim-7b';
const TICKS = 100; // USER_HZ on Linux

const dir = await mkdtemp(join(tmpdir(), 'motor-bench-workers-'));
const started: MotorChild[] = [];
const motor = async (args: string[], env?: NodeJS.ProcessEnv, waitFor?: string[]): Promise<MotorChild> => {
  const c = await spawnMotor(args, {
    timeoutMs: 60_000,
    followLogs: false,
    ...(env ? { env: { ...process.env, ...env } } : {}),
    ...(waitFor ? { waitFor } : {}),
  });
  started.push(c);
  return c;
};

/** A process and its children (a cluster primary's workers): their pids now. */
const family = (pid: number): number[] => {
  let children: number[] = [];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    // no children
  }
  return [pid, ...children];
};
const cpuSeconds = async (pids: number[]): Promise<number> => {
  let ticks = 0;
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11] ?? 0) + Number(fields[12] ?? 0); // utime, stime
  }
  return ticks / TICKS;
};
/** CPU seconds of this process's waited-for children (cutime + cstime): wrk's, run synchronously. */
const childrenCpuSeconds = async (): Promise<number> => {
  const stat = await readFile('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / TICKS;
};
const machineBusy = async (): Promise<{ busy: number; total: number }> => {
  const cpu = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const total = cpu.reduce((a, b) => a + b, 0);
  const idle = cpu[3]! + cpu[4]!;
  return { busy: total - idle, total };
};

const body = JSON.stringify({
  model: MODEL,
  max_tokens: Number(values['max-tokens']),
  messages: [{ role: 'user', content: 'How much does a second coordinator process add?' }],
});
const script = join(dir, 'wrk.lua');
await writeFile(
  script,
  `wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\nwrk.body = [[${body}]]\n` +
    `done = function(summary, latency, requests)\n` +
    `  io.write(string.format("MOTOR %d %d %f %f\\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout, summary.duration, latency:percentile(50)))\n` +
    `end\n`,
);
const wrk = (
  url: string,
  seconds: number,
): { requests: number; rps: number; p50: number; errors: number } => {
  const out = execFileSync(
    'wrk',
    [
      '-t',
      '1',
      '-c',
      String(connections),
      '-d',
      `${seconds}s`,
      '--timeout',
      '30s',
      '-s',
      script,
      `${url}/v1/chat/completions`,
    ],
    { encoding: 'utf8' },
  );
  const m = /MOTOR (\d+) (\d+) ([\d.]+) ([\d.]+)/.exec(out);
  if (!m) throw new Error(`wrk output not understood:\n${out}`);
  const [n, errors, durUs, p50Us] = m.slice(1).map(Number) as [number, number, number, number];
  return { requests: n, rps: n / (durUs / 1e6), p50: p50Us / 1000, errors };
};

console.log(`loadavg at start ${(await readFile('/proc/loadavg', 'utf8')).trim()}`);
try {
  const sim = await motor([
    'sim',
    '--port',
    '0',
    '--role',
    'union',
    '--time-scale',
    '0',
    '--max-num-seqs',
    '20000',
    '--record-max',
    '0',
    '--ledger-max',
    '0',
  ]);
  const file = join(dir, 'motor.yaml');
  await writeFile(
    file,
    stringify({
      server: { port: 0 },
      instances: [{ url: sim.url, role: 'union', mode: 'direct', models: [MODEL] }],
      upstream: { connectionsPerInstance: 2048 },
      scheduling: { admission: { maxConcurrent: 4096 } },
      observability: { accessLog: false },
    }),
  );
  const coordinator = (workers: number, env?: NodeJS.ProcessEnv): Promise<MotorChild> =>
    motor(
      ['coordinator', '--config', file, '--workers', String(workers)],
      env,
      workers > 1 ? ['workers'] : undefined,
    );
  const targets: [string, MotorChild][] = [
    ['direct (sim)', sim],
    ['workers 1', await coordinator(1)],
    ['workers 2 (rr)', await coordinator(2)],
    ['workers 2 (none)', await coordinator(2, { NODE_CLUSTER_SCHED_POLICY: 'none' })],
  ];
  type Run = {
    rps: number;
    p50: number;
    coordCpu: number;
    primaryCpu: number;
    simCpu: number;
    wrkUsPerReq: number;
    simUsPerReq: number;
    busy: number;
    perReqUs: number;
  };
  const results = new Map<string, Run[]>(targets.map(([n]) => [n, []]));
  for (const [, c] of targets) wrk(c.url, 2); // warm-up (V8 optimises the hot path)
  for (let r = 0; r < runs; r++)
    for (const [name, c] of targets) {
      const coordPids = c === sim ? [] : family(c.child.pid!);
      const primary = coordPids.length > 1 ? [coordPids[0]!] : [];
      const [p0, c0, s0, m0] = [
        await cpuSeconds(primary),
        await cpuSeconds(coordPids),
        await cpuSeconds([sim.child.pid!]),
        await machineBusy(),
      ];
      const w0 = await childrenCpuSeconds();
      const w = wrk(c.url, durationS);
      const wrkCpu = (await childrenCpuSeconds()) - w0;
      const [p1, c1, s1, m1] = [
        await cpuSeconds(primary),
        await cpuSeconds(coordPids),
        await cpuSeconds([sim.child.pid!]),
        await machineBusy(),
      ];
      if (w.errors > 0) console.log(`  (${name}: ${w.errors} wrk errors)`);
      const seconds = w.requests / w.rps;
      results.get(name)!.push({
        rps: w.rps,
        p50: w.p50,
        coordCpu: (c1 - c0) / seconds,
        primaryCpu: (p1 - p0) / seconds,
        simCpu: (s1 - s0) / seconds,
        wrkUsPerReq: (wrkCpu / w.requests) * 1e6,
        simUsPerReq: ((s1 - s0) / w.requests) * 1e6,
        busy: (m1.busy - m0.busy) / (m1.total - m0.total),
        perReqUs: ((c1 - c0) / w.requests) * 1e6,
      });
    }
  const loadavg = (await readFile('/proc/loadavg', 'utf8')).trim();
  console.log(
    `\nwrk -t1 -c${connections}, ${runs} × ${durationS} s per target (median run), sim time-scale 0, not pinned; loadavg ${loadavg}`,
  );
  console.log(
    'target             req/s   p50 ms  coord cores (primary)  sim cores  machine busy  coord µs/req  req/s per coord core   runs (req/s)',
  );
  const medians = new Map<string, Run>();
  for (const [name, rs] of results) {
    const m = [...rs].sort((a, b) => a.rps - b.rps)[Math.floor(rs.length / 2)]!;
    medians.set(name, m);
    console.log(
      `${name.padEnd(17)} ${m.rps.toFixed(0).padStart(6)} ${m.p50.toFixed(2).padStart(8)} ${m.coordCpu.toFixed(2).padStart(12)} (${m.primaryCpu.toFixed(2)}) ${m.simCpu.toFixed(2).padStart(10)} ${(100 * m.busy).toFixed(0).padStart(12)} % ${m.perReqUs.toFixed(0).padStart(13)} ${(m.coordCpu > 0 ? m.rps / m.coordCpu : 0).toFixed(0).padStart(21)}   ${rs.map((x) => x.rps.toFixed(0)).join(' ')}`,
    );
  }
  // where the CPU of one request goes (median runs): what 2 shared cores can give at most
  console.log('\nCPU per request, µs (median run): coordinator / sim / wrk');
  for (const [name, m] of medians)
    console.log(
      `${name.padEnd(17)} ${m.perReqUs.toFixed(0).padStart(6)} ${m.simUsPerReq.toFixed(0).padStart(6)} ${m.wrkUsPerReq.toFixed(0).padStart(6)}`,
    );
  const one = medians.get('workers 1')!.rps;
  for (const name of ['workers 2 (rr)', 'workers 2 (none)'])
    console.log(`${name} / workers 1 = ${(medians.get(name)!.rps / one).toFixed(2)}×`);
} finally {
  for (const c of started.reverse()) await c.stop();
  await rm(dir, { recursive: true, force: true });
}
