/**
 * Paired CPU A/B of two coordinator builds (issue 19): coordinator CPU per request, side by side.
 * Both coordinators (`bin/motor.js` of two built checkouts, or one build with two configs) run on the
 * same `motor sim` processes (`--time-scale 0`: no model time) with bench:overhead's single or P/D
 * config; every server is pinned to `--server-cpus` (0) and wrk to `--wrk-cpus` (1) with taskset
 * (when another benchmark holds core 0, swap them). After a warm-up (V8 must optimise the hot
 * path), wrk drives A and B in turns (A B B A A B …, so neither is always first)
 * for `--runs` × `--duration` s each; per run CPU µs per request = Δ(utime+stime) of the
 * coordinator (/proc/<pid>/stat, all threads) ÷ requests wrk completed (a round where either target
 * completed none, a machine stalled by other work, is dropped and counted). Reported per target:
 * the median and lower quartile over runs, min–max, req/s; and the B/A ratio of medians and of lower
 * quartiles, and the median of the paired per-round ratios, with the load average. On a busy
 * machine (other benchmarks on the same cores) CPU per request rises up to 3× from round to round
 * and an A/A run differs by ±5–10 %: take several runs (short rounds pair better than long ones);
 * a `node --cpu-prof` profile of both builds tells where a difference is.
 *
 *   npm run bench:ab-cpu -- --a DIR --b DIR [--mode single|pd] [--stream]
 *     [--runs 20] [--duration 1] [--connections 64] [--max-tokens 16] [--warmup 4]
 *     [--sims DIR] [--a-config JSON] [--b-config JSON] [--server-cpus 0] [--wrk-cpus 1]
 *   --a / --b: built checkouts (default: this one). --sims DIR: the build the sims run from (default:
 *     this one: 6e16f0a's P/D sims served ~40 req/s at ms of coordinator CPU per request).
 *   --a-config / --b-config: JSON merged over the coordinator config of that target, e.g.
 *     --b-config '{"observability":{"accessLog":false}}' to price the access log on one build.
 *   --warmup: seconds of wrk per target before the runs (twice, alternating).
 *   --json FILE: also write the per-round CPU µs/req and req/s of each target and the ratios there
 *     (bench:guard reads it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';
import { mergeDeep } from '../../src/config/merge-deep.js';
import { benchInstances, benchSimArgs } from './overhead-servers.js';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: '.' },
    b: { type: 'string', default: '.' },
    sims: { type: 'string', default: '.' },
    mode: { type: 'string', default: 'single' },
    stream: { type: 'boolean', default: false },
    runs: { type: 'string', default: '20' },
    duration: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    'max-tokens': { type: 'string', default: '16' },
    warmup: { type: 'string', default: '4' },
    'a-config': { type: 'string', default: '{}' },
    'b-config': { type: 'string', default: '{}' },
    'server-cpus': { type: 'string', default: '0' },
    'wrk-cpus': { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const MODEL = 'motor-sim-7b';
const runs = Number(values.runs);
const seconds = Number(values.duration);
const mode = values.mode;
if (mode !== 'single' && mode !== 'pd') throw new Error(`--mode single|pd, not ${mode}`);

const binOf = (root: string): string => {
  const bin = join(resolve(root), 'bin', 'motor.js');
  if (!existsSync(join(resolve(root), 'dist', 'cli'))) throw new Error(`${root}: not built (npm run build)`);
  return bin;
};
const targets = [
  { name: 'A', bin: binOf(values.a), extra: JSON.parse(values['a-config']) as Record<string, unknown> },
  { name: 'B', bin: binOf(values.b), extra: JSON.parse(values['b-config']) as Record<string, unknown> },
];

const run = (cmd: string, args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8' });
const pin = (pid: number, cpus: string): void => void run('taskset', ['-a', '-cp', cpus, String(pid)]);
const CLK_TCK = Number(run('getconf', ['CLK_TCK']).trim()) || 100;
/** utime + stime of a process in ms (/proc/<pid>/stat fields 14 and 15). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}
const loadavg = async (): Promise<string> =>
  (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
/** The `q` quantile of `xs`, linearly interpolated. */
const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  const at = q * (s.length - 1);
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
};
const median = (xs: number[]): number => quantile(xs, 0.5);

const dir = await mkdtemp(join(tmpdir(), 'motor-ab-cpu-'));
const children: MotorChild[] = [];
const cleanup = async (): Promise<void> => {
  for (const c of [...children].reverse()) await c.stop().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void cleanup().finally(() => process.exit(130)));
async function motor(args: string[], bin: string): Promise<MotorChild> {
  const c = await spawnMotor(args, { timeoutMs: 60_000, followLogs: false, bin });
  children.push(c);
  return c;
}

const wrkScript = join(dir, 'post.lua');
await writeFile(
  wrkScript,
  `wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\nwrk.body = [[${JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'How much latency does a coordinator add per request?' }],
    max_tokens: Number(values['max-tokens']),
    stream: values.stream,
  })}]]\n` +
    `done = function(summary, latency, requests)\n` +
    `  io.write(string.format("MOTOR %d %d %f\\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout, summary.duration))\n` +
    `end\n`,
);
/** wrk (one thread, on core 1) against `url`; requests completed and req/s. */
function wrk(url: string, s: number): { requests: number; rps: number } {
  const out = run('taskset', [
    '-c',
    values['wrk-cpus'],
    'wrk',
    '-t1',
    `-c${values.connections}`,
    `-d${s}s`,
    '--timeout',
    '30s',
    '-s',
    wrkScript,
    `${url}/v1/chat/completions`,
  ]);
  const m = /MOTOR (\d+) (\d+) ([\d.]+)/.exec(out);
  if (!m) throw new Error(`wrk output not understood:\n${out}`);
  if (Number(m[2]) > 0) throw new Error(`wrk: ${m[2]} errors against ${url}`);
  return { requests: Number(m[1]), rps: Number(m[1]) / (Number(m[3]) / 1e6) };
}

try {
  const sim = (role: string): Promise<MotorChild> =>
    motor(benchSimArgs(role, ['--max-num-seqs', '20000']), binOf(values.sims));
  const sims = await Promise.all(mode === 'single' ? [sim('union')] : [sim('prefill'), sim('decode')]);
  const instances = benchInstances(mode, sims, MODEL);
  const base = {
    server: { port: 0 },
    instances,
    upstream: { connectionsPerInstance: 2048 },
    scheduling: { admission: { maxConcurrent: 4096 } },
  };
  const coords = await Promise.all(
    targets.map(async (t) => {
      const file = join(dir, `${t.name}.yaml`);
      await writeFile(file, stringify(mergeDeep(base, t.extra)));
      return { ...t, c: await motor(['coordinator', '--config', file], t.bin) };
    }),
  );
  for (const c of [...sims, ...coords.map((x) => x.c)]) pin(c.child.pid!, values['server-cpus']);

  for (let i = 0; i < 2; i++) for (const t of coords) wrk(t.c.url, Number(values.warmup));
  const per = new Map(coords.map((t) => [t.name, { cpu: [] as number[], rps: [] as number[] }]));
  let dropped = 0;
  for (let r = 0; r < runs; r++) {
    // A B, B A, A B, …: each target goes first every other round
    const round: Array<{ name: string; cpu: number; rps: number }> = [];
    for (const t of r % 2 === 0 ? coords : [...coords].reverse()) {
      const pid = t.c.child.pid!;
      const before = await cpuMs(pid);
      const w = wrk(t.c.url, seconds);
      const used = (await cpuMs(pid)) - before;
      round.push({ name: t.name, cpu: (used * 1000) / w.requests, rps: w.rps });
    }
    if (round.some((x) => !Number.isFinite(x.cpu))) dropped++;
    else
      for (const x of round) {
        per.get(x.name)!.cpu.push(x.cpu);
        per.get(x.name)!.rps.push(x.rps);
      }
  }
  if (dropped === runs) throw new Error('no round completed a request on both targets');
  console.log(
    `ab-cpu: mode ${mode}, ${values.stream ? 'stream' : 'non-stream'}, wrk -c${values.connections}, ` +
      `max_tokens ${values['max-tokens']}, ${runs} × ${seconds} s per target` +
      `${dropped ? ` (${dropped} rounds dropped: no request done)` : ''}; load ${await loadavg()}`,
  );
  for (const t of coords) {
    const p = per.get(t.name)!;
    const cfg = JSON.stringify(t.extra);
    console.log(
      `${t.name}  ${t.bin}${cfg === '{}' ? '' : ` ${cfg}`}\n   CPU µs/req median ${median(p.cpu).toFixed(1)}` +
        `, lower quartile ${quantile(p.cpu, 0.25).toFixed(1)} (min ${Math.min(...p.cpu).toFixed(1)}, max ${Math.max(...p.cpu).toFixed(1)})` +
        `, req/s median ${median(p.rps).toFixed(0)}` +
        `\n   runs: ${p.cpu.map((x) => x.toFixed(0)).join(' ')}`,
    );
  }
  const a = per.get('A')!.cpu;
  const b = per.get('B')!.cpu;
  const paired = a.map((x, i) => b[i]! / x);
  if (values.json)
    await writeFile(
      values.json,
      JSON.stringify({
        mode,
        stream: values.stream,
        load: await loadavg(),
        dropped,
        a: { cpuUs: a, rps: per.get('A')!.rps, medianCpuUs: median(a) },
        b: { cpuUs: b, rps: per.get('B')!.rps, medianCpuUs: median(b) },
        ratioOfMedians: median(b) / median(a),
        medianPairedRatio: median(paired),
      }),
    );
  console.log(
    `B/A CPU per request: ratio of medians ${(median(b) / median(a)).toFixed(3)}, of lower quartiles ` +
      `${(quantile(b, 0.25) / quantile(a, 0.25)).toFixed(3)}, median paired ratio ` +
      `${median(paired).toFixed(3)} (min ${Math.min(...paired).toFixed(3)}, max ${Math.max(...paired).toFixed(3)})`,
  );
} finally {
  await cleanup();
}
