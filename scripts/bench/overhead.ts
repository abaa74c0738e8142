/**
 * What Motor costs on top of an engine, in one run (docs/BENCHMARKS.md "Overhead"):
 *   (a) `motor sim` directly, (b) Motor single-instance (coordinator → union sim, direct mode),
 *   (c) Motor P/D handoff (coordinator → prefill sim + decode sim), (d) nginx `proxy_pass` to the
 *   same sim (the floor any proxy pays; skipped with a message when nginx is not installed).
 * All sims run with `--time-scale 0`, so model time is zero and every difference is proxy cost.
 *
 * 1. Added latency per request: sequential requests (concurrency 1) after `--warmup` requests per
 *    target and mode, targets alternating round by round; p50/p99 over all samples, minus direct. Non-stream and stream.
 * 2. Max throughput with wrk (servers pinned to core 0, wrk to core 1 with taskset): non-stream, and
 *    streaming with 1,000 concurrent streams; and each proxy's own CPU per request from /proc (steady under load).
 * 3. Memory of N concurrent idle streams through the coordinator (sim with a 10-minute ITL: the
 *    first token arrives, then the stream idles): coordinator RSS before and with N open.
 * 4. Long prompts (issue 19, phase `long-prompt`): a P/D coordinator of its own (direct NIXL handoff,
 *    default prefix-affinity scheduling) on the same prefill and decode sims; `--long-requests`
 *    non-stream requests (`--long-concurrency` at a time, default 1, after `--long-warmup`) of each chat body size (`--long-sizes`, KiB); the coordinator's
 *    CPU per request from /proc/<pid>/stat (utime+stime delta ÷ requests) next to one
 *    `JSON.parse` + `JSON.stringify` of the same body timed in this process in the same round; the
 *    ratio per round, median over `--rounds`. `--long-profile DIR` runs that coordinator under
 *    `node --cpu-prof` (profile written to DIR when it stops).
 *
 * Prerequisites (the script installs nothing): `apt-get install -y nginx wrk`.
 *   npm run bench:overhead -- [--rounds 5] [--requests 200] [--warmup 2000] [--duration 5] [--tput-runs 3]
 *     [--idle-streams 9900] [--phases latency,throughput,idle,long-prompt] [--json report.json] [--baseline DIR]
 *     [--long-sizes 225,1024] [--long-requests 60] [--long-warmup 2000] [--long-concurrency 1]
 *     [--long-profile DIR]
 *   --baseline DIR: another built checkout of Motor (e.g. `git worktree add ../base <commit> && npm ci`
 *   there); its coordinators run as extra targets `base-single` / `base-pd` on the same sims, so a
 *   change is compared with its parent side by side in one run.
 *   (the npm script builds first; or: npx tsx scripts/bench/overhead.ts …)
 * Folds in the former bench/coordinator-overhead.ts (its sequential latency comparison is step 1).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '2000' },
    'max-tokens': { type: 'string', default: '16' },
    duration: { type: 'string', default: '5' },
    'tput-runs': { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    streams: { type: 'string', default: '1000' },
    // 2 fds per stream in the coordinator; the default stays under a 20,000 open-files limit
    'idle-streams': { type: 'string', default: '9900' },
    json: { type: 'string' },
    phases: { type: 'string', default: 'latency,throughput,idle,long-prompt' },
    baseline: { type: 'string' },
    'long-sizes': { type: 'string', default: '225,1024' },
    'long-requests': { type: 'string', default: '60' },
    'long-warmup': { type: 'string', default: '2000' },
    'long-concurrency': { type: 'string', default: '1' },
    'long-profile': { type: 'string' },
  },
});
const phases = new Set(values.phases.split(','));
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const warmup = Number(values.warmup);
const maxTokens = Number(values['max-tokens']);
const durationS = Number(values.duration);
const tputRuns = Number(values['tput-runs']);
const connections = Number(values.connections);
const streams = Number(values.streams);
const idleStreams = Number(values['idle-streams']);
const MODEL = 'motor-sim-7b';

const which = (bin: string): string | null => {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin']))
    if (existsSync(join(dir, bin))) return join(dir, bin);
  return null;
};
const NGINX = which('nginx');
const WRK = which('wrk');
const TASKSET = which('taskset');

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};
const body = (stream: boolean): string =>
  JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'How much latency does a coordinator add per request?' }],
    max_tokens: maxTokens,
    stream,
  });

const cleanups: Array<() => Promise<void>> = [];
const dir = await mkdtemp(join(tmpdir(), 'motor-overhead-'));
cleanups.push(() => rm(dir, { recursive: true, force: true }));

const BASELINE_BIN = values.baseline ? join(values.baseline, 'bin', 'motor.js') : undefined;
if (BASELINE_BIN && !existsSync(BASELINE_BIN)) {
  console.error(`--baseline: ${BASELINE_BIN} not found (give a built checkout of Motor)`);
  process.exit(2);
}

async function motor(args: string[], bin?: string): Promise<MotorChild> {
  const c = await spawnMotor(args, { timeoutMs: 60_000, followLogs: false, bin });
  cleanups.push(() => c.stop());
  return c;
}
const sim = (role: string, extra: string[] = []): Promise<MotorChild> =>
  motor([
    'sim',
    '--port',
    '0',
    '--role',
    role,
    '--time-scale',
    '0',
    '--record-max',
    '0',
    '--ledger-max',
    '0',
    ...extra,
  ]);
async function coordinator(name: string, config: Record<string, unknown>, bin?: string): Promise<MotorChild> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, stringify({ server: { port: 0 }, ...config }));
  return motor(['coordinator', '--config', file], bin);
}

/** A coordinator run as `node --cpu-prof` (not allowed in NODE_OPTIONS): its profile lands in `profileDir` at exit. */
async function profiledCoordinator(
  name: string,
  config: Record<string, unknown>,
  profileDir: string,
): Promise<{ url: string; pid: number }> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, stringify({ server: { port: 0 }, ...config }));
  const bin = fileURLToPath(new URL('../../bin/motor.js', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, bin, 'coordinator', '--config', file],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  cleanups.push(async () => {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    if (!line.includes('"listening"')) continue;
    const url = (JSON.parse(line) as { url?: string }).url;
    if (url) {
      lines.close();
      child.stdout!.resume();
      return { url, pid: child.pid! };
    }
  }
  throw new Error(`${name}: exited before listening`);
}
const pin = (pid: number | undefined, cpus: string): void => {
  if (TASKSET && pid) execFileSync(TASKSET, ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
};

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function startNginx(upstream: string): Promise<{ url: string; proc: ChildProcess } | null> {
  if (!NGINX) return null;
  const port = await freePort();
  const u = new URL(upstream);
  const conf = join(dir, 'nginx.conf');
  await writeFile(
    conf,
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream sim { server ${u.host}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const proc = spawn(NGINX, ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: 'ignore' });
  cleanups.push(async () => {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const p = new Pool(url);
      const r = await p.request({ method: 'GET', path: '/health' });
      await r.body.text();
      await p.close();
      return { url, proc };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('nginx did not start');
}

async function one(pool: Pool, stream: boolean): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: body(stream),
  });
  const text = await res.body.text();
  const ms = performance.now() - t0;
  if (res.statusCode !== 200 || (stream && !text.endsWith('data: [DONE]\n\n')))
    throw new Error(`unexpected answer ${res.statusCode}: ${text.slice(0, 200)}`);
  return ms;
}

/** wrk against `url` for `durationS`; returns requests/s and latency p50/p99 (ms). */
async function wrk(
  url: string,
  stream: boolean,
  conns: number,
  seconds = durationS,
): Promise<{ rps: number; p50: number; p99: number; requests: number }> {
  const script = join(dir, `wrk-${stream}.lua`);
  await writeFile(
    script,
    `wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\nwrk.body = [[${body(stream)}]]\n` +
      `done = function(summary, latency, requests)\n` +
      `  io.write(string.format("MOTOR %d %d %f %f %f\\n", summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout, summary.duration, latency:percentile(50), latency:percentile(99)))\n` +
      `end\n`,
  );
  const args = [
    '-t',
    '1',
    '-c',
    String(conns),
    '-d',
    `${seconds}s`,
    '--timeout',
    '30s',
    '-s',
    script,
    `${url}/v1/chat/completions`,
  ];
  const out = TASKSET
    ? execFileSync(TASKSET, ['-c', '1', WRK!, ...args], { encoding: 'utf8' })
    : execFileSync(WRK!, args, { encoding: 'utf8' });
  const m = /MOTOR (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)/.exec(out);
  if (!m) throw new Error(`wrk output not understood:\n${out}`);
  const [n, errors, durUs, p50Us, p99Us] = m.slice(1).map(Number) as [number, number, number, number, number];
  if (errors > 0) console.log(`  (wrk: ${errors} errors against ${url})`);
  return { rps: n / (durUs / 1e6), p50: p50Us / 1000, p99: p99Us / 1000, requests: n };
}

const longSizes = values['long-sizes'].split(',').map(Number);
const longRequests = Number(values['long-requests']);
const longWarmup = Number(values['long-warmup']);
const longConcurrency = Number(values['long-concurrency']);

/** `n` requests of `text` to `pool`, `longConcurrency` at a time. */
async function postLongMany(pool: Pool, text: string, n: number): Promise<void> {
  let left = n;
  const worker = async (): Promise<void> => {
    while (left > 0) {
      left--;
      await postLong(pool, text);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, longConcurrency) }, worker));
}

/**
 * A chat body of about `bytes` bytes shaped like agentic traffic: a system prompt, then user and
 * assistant turns of a few KiB of word text with newlines, quotes and code (escapes included), the
 * last turn the user's. Deterministic, so every run sends the same bytes.
 */
function longChatBody(bytes: number): string {
  const words = [
    'the',
    'coordinator',
    'routes',
    'prefill',
    'decode',
    'function',
    'return',
    'value',
    '"quoted"',
    'cache',
  ];
  let seed = 19;
  const next = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const turn = (chars: number): string => {
    let out = '';
    while (out.length < chars) {
      const w = words[next() % words.length]!;
      out += next() % 17 === 0 ? `${w}\n\tif (x) { y(); }\n` : `${w} `;
    }
    return out;
  };
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: turn(2000) }];
  const head = { model: MODEL, max_tokens: maxTokens, stream: false };
  let size = JSON.stringify({ ...head, messages }).length;
  while (size < bytes) {
    const m = {
      role: messages.length % 2 === 1 ? 'user' : 'assistant',
      content: turn(Math.min(6000, bytes - size)),
    };
    messages.push(m);
    size += JSON.stringify(m).length + 1;
  }
  if (messages[messages.length - 1]!.role !== 'user') messages.push({ role: 'user', content: 'Go on.' });
  return JSON.stringify({ ...head, messages });
}

/**
 * CPU ms (user + system, this process) of one `JSON.parse` + `JSON.stringify` of `text`, over 30 runs
 * after 10 warm-up runs: CPU time like the coordinator's, so a loaded machine's preemption is not counted.
 */
function parseStringifyMs(text: string): number {
  for (let i = 0; i < 10; i++) JSON.stringify(JSON.parse(text));
  const before = process.cpuUsage();
  for (let i = 0; i < 30; i++) JSON.stringify(JSON.parse(text));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / 30;
}

/** utime + stime of a process, in clock ticks (/proc/<pid>/stat fields 14 and 15). */
async function cpuTicks(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 on
  return { user: Number(fields[11]), system: Number(fields[12]) };
}
function clockTick(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/**
 * A process's CPU ms per wall ms while it gets no requests (its timers, probes and scrapes), over
 * `ms` of wall time: the long-prompt phase subtracts it for the wall time of its requests.
 */
async function idleCpuRate(pid: number, ms = 2000): Promise<number> {
  const tick = clockTick();
  const a = await cpuTicks(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const b = await cpuTicks(pid);
  return ((b.user + b.system - a.user - a.system) * (1000 / tick)) / (performance.now() - t0);
}

async function postLong(pool: Pool, text: string): Promise<void> {
  const res = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: text,
  });
  const answer = await res.body.text();
  if (res.statusCode !== 200)
    throw new Error(`long prompt: unexpected answer ${res.statusCode}: ${answer.slice(0, 200)}`);
}

/** CPU time (user + system, ms) some processes have used so far, all threads. */
const cpuMs = async (pids: number[]): Promise<number> => {
  let ticks = 0;
  for (const pid of pids) {
    const { user, system } = await cpuTicks(pid);
    ticks += user + system;
  }
  return (ticks * 1000) / clockTick();
};

const rssKiB = async (pid: number): Promise<number> =>
  Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]);

const report: Record<string, unknown> = {
  when: new Date().toISOString(),
  rounds,
  requests,
  maxTokens,
  durationS,
};
try {
  const NIXL = { kv_connector: 'NixlConnector' };
  const [union, pre, dec] = await Promise.all([
    sim('union', ['--max-num-seqs', '20000']),
    sim('prefill', ['--max-num-seqs', '20000']),
    sim('decode', ['--max-num-seqs', '20000']),
  ]);
  const singleConfig = {
    instances: [{ url: union.url, role: 'union', mode: 'direct', models: [MODEL] }],
    upstream: { connectionsPerInstance: 2048 },
    scheduling: { admission: { maxConcurrent: 4096 } },
  };
  const pdConfig = {
    instances: [
      { id: 'P', url: pre.url, role: 'prefill', mode: 'direct', models: [MODEL], kvTransferConfig: NIXL },
      { id: 'D', url: dec.url, role: 'decode', mode: 'direct', models: [MODEL], kvTransferConfig: NIXL },
    ],
    upstream: { connectionsPerInstance: 2048 },
    scheduling: { admission: { maxConcurrent: 4096 } },
  };
  const [single, pd, baseSingle, basePd] = await Promise.all([
    coordinator('single', singleConfig),
    coordinator('pd', pdConfig),
    BASELINE_BIN ? coordinator('base-single', singleConfig, BASELINE_BIN) : null,
    BASELINE_BIN ? coordinator('base-pd', pdConfig, BASELINE_BIN) : null,
  ]);
  const nginx = await startNginx(union.url);
  if (!nginx) console.log('nginx not found: skipping (d). Install it with `apt-get install -y nginx`.');
  const targets: Array<[string, string]> = [
    ['direct', union.url],
    ['motor-single', single.url],
    ['motor-pd', pd.url],
    ...(baseSingle && basePd
      ? ([
          ['base-single', baseSingle.url],
          ['base-pd', basePd.url],
        ] as Array<[string, string]>)
      : []),
    ...(nginx ? ([['nginx', nginx.url]] as Array<[string, string]>) : []),
  ];

  // 1. added latency (sequential; alternating rounds)
  if (phases.has('latency')) {
    const pools = new Map(targets.map(([n, u]) => [n, new Pool(u, { connections: 1 })]));
    cleanups.push(async () => void (await Promise.all([...pools.values()].map((p) => p.close()))));
    // V8 needs a few thousand requests to optimise the coordinator's hot path: measure it warm
    for (let i = 0; i < 2 * warmup; i++) for (const p of pools.values()) await one(p, i % 2 === 0);
    const latency: Record<
      string,
      Record<string, { p50: number; p99: number; addedP50: number; addedP99: number }>
    > = {};
    for (const stream of [false, true]) {
      const samples = new Map(targets.map(([n]) => [n, [] as number[]]));
      for (let r = 0; r < rounds; r++)
        for (const [n] of targets)
          for (let i = 0; i < requests; i++) samples.get(n)!.push(await one(pools.get(n)!, stream));
      const d = samples.get('direct')!;
      const mode = stream ? 'stream' : 'non-stream';
      latency[mode] = {};
      for (const [n] of targets) {
        const s = samples.get(n)!;
        latency[mode][n] = {
          p50: pct(s, 50),
          p99: pct(s, 99),
          addedP50: pct(s, 50) - pct(d, 50),
          addedP99: pct(s, 99) - pct(d, 99),
        };
      }
    }
    report.latency = latency;
    console.log(
      `\nadded latency (sequential, ${rounds}×${requests} per target and mode, max_tokens ${maxTokens}), ms`,
    );
    console.log('mode        target        p50      p99   added p50  added p99');
    for (const [mode, rows] of Object.entries(latency))
      for (const [n, v] of Object.entries(rows))
        console.log(
          `${mode.padEnd(11)} ${n.padEnd(12)} ${v.p50.toFixed(3).padStart(7)} ${v.p99.toFixed(3).padStart(8)} ${v.addedP50.toFixed(3).padStart(10)} ${v.addedP99.toFixed(3).padStart(10)}`,
        );
  }

  // 2. throughput (servers on core 0, wrk on core 1)
  if (!phases.has('throughput')) {
    // skipped
  } else if (!WRK)
    console.log('\nwrk not found: skipping throughput. Install it with `apt-get install -y wrk`.');
  else {
    // every coordinator on core 0 (the baseline's too: unpinned it would share wrk's core)
    const servers = [union, pre, dec, single, pd, baseSingle, basePd].filter((c) => c !== null);
    for (const c of servers) pin(c.child.pid, '0');
    pin(nginx?.proc.pid, '0');
    if (nginx)
      execFileSync('sh', [
        '-c',
        `for p in $(pgrep -P ${nginx.proc.pid}); do taskset -a -cp 0 $p >/dev/null; done`,
      ]);
    // One wrk run swings by ±30 % on this shared machine: targets take turns, run after run, and
    // the median run of each counts (every run's req/s is kept in the report).
    // Proxy CPU per request (the target's own processes, /proc): unlike req/s it barely moves when
    // other work shares the machine. direct: the sim; motor-*: the coordinator; nginx: its workers.
    const nginxWorkers = nginx
      ? execFileSync('pgrep', ['-P', String(nginx.proc.pid)], { encoding: 'utf8' })
          .split(/\s+/)
          .filter(Boolean)
          .map(Number)
      : [];
    const pidsOf: Record<string, number[]> = {
      direct: [union.child.pid!],
      'motor-single': [single.child.pid!],
      'motor-pd': [pd.child.pid!],
      ...(baseSingle && basePd
        ? { 'base-single': [baseSingle.child.pid!], 'base-pd': [basePd.child.pid!] }
        : {}),
      nginx: nginxWorkers,
    };
    type Run = { rps: number; p50: number; p99: number; cpuUsPerReq: number };
    const tput: Record<string, Record<string, Run & { runs: number[] }>> = {};
    for (const [mode, stream, conns] of [
      ['non-stream', false, connections],
      [`stream (${streams} concurrent)`, true, streams],
    ] as Array<[string, boolean, number]>) {
      const runs = new Map<string, Run[]>(targets.map(([n]) => [n, []]));
      for (const [, u] of targets) await wrk(u, stream, conns, 2); // warm-up
      for (let r = 0; r < tputRuns; r++)
        for (const [n, u] of targets) {
          const cpu0 = await cpuMs(pidsOf[n] ?? []);
          const w = await wrk(u, stream, conns);
          const cpuUsPerReq = (((await cpuMs(pidsOf[n] ?? [])) - cpu0) * 1000) / Math.max(1, w.requests);
          runs.get(n)!.push({ ...w, cpuUsPerReq });
        }
      tput[mode] = {};
      for (const [n, rs] of runs) {
        const median = [...rs].sort((a, b) => a.rps - b.rps)[Math.floor(rs.length / 2)]!;
        const cpus = rs.map((x) => x.cpuUsPerReq).sort((a, b) => a - b);
        tput[mode][n] = {
          ...median,
          cpuUsPerReq: cpus[Math.floor(cpus.length / 2)]!,
          runs: rs.map((x) => Math.round(x.rps)),
        };
      }
    }
    report.throughput = tput;
    console.log(
      `\nthroughput (wrk -t1, median of ${tputRuns} × ${durationS} s per target, servers pinned to core 0, wrk to core 1${TASKSET ? '' : ' — taskset missing, not pinned'})`,
    );
    console.log(
      'mode                          target        req/s    p50 ms    p99 ms  CPU µs/req   runs (req/s)',
    );
    for (const [mode, rows] of Object.entries(tput))
      for (const [n, v] of Object.entries(rows))
        console.log(
          `${mode.padEnd(29)} ${n.padEnd(12)} ${v.rps.toFixed(0).padStart(7)} ${v.p50.toFixed(2).padStart(9)} ${v.p99.toFixed(2).padStart(9)} ${v.cpuUsPerReq.toFixed(0).padStart(11)}   ${v.runs.join(' ')}`,
        );
    if (nginx) {
      for (const [mode, rows] of Object.entries(tput))
        for (const [n, v] of Object.entries(rows))
          if (n !== 'nginx' && n !== 'direct')
            console.log(`${mode}: ${n} / nginx = ${((100 * v.rps) / rows.nginx!.rps).toFixed(0)} %`);
    }
    for (const c of servers) pin(c.child.pid, '0,1');
  }

  // 3. memory of idle streams through the coordinator
  if (phases.has('idle')) {
    const idleSim = await sim('union', [
      '--time-scale',
      '1',
      '--prefill-overhead-ms',
      '1',
      '--itl-ms',
      '600000',
      '--max-num-seqs',
      String(idleStreams + 100),
    ]);
    const idleCoord = await coordinator('idle', {
      instances: [{ url: idleSim.url, role: 'union', mode: 'direct', models: [MODEL] }],
      upstream: { connectionsPerInstance: idleStreams + 100 },
      timeouts: { idleMs: 0, firstTokenMs: 0, totalMs: 0 },
      scheduling: { admission: { maxConcurrent: idleStreams + 100, maxQueue: 0 } },
    });
    const idlePool = new Pool(idleCoord.url, { connections: idleStreams, pipelining: 1 });
    cleanups.push(() => idlePool.destroy());
    // (no warm-up request: with a 10-minute ITL a non-stream answer would take hours)
    const before = await rssKiB(idleCoord.child.pid!);
    const ctl = new AbortController();
    setMaxListeners(idleStreams + 10, ctl.signal); // one signal ends every idle stream
    let open = 0;
    const bodies: Array<Promise<unknown>> = [];
    const t0 = performance.now();
    for (let i = 0; i < idleStreams; i++) {
      bodies.push(
        idlePool
          .request({
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { 'content-type': 'application/json' },
            body: body(true).replace(`"max_tokens":${maxTokens}`, '"max_tokens":4'),
            signal: ctl.signal,
          })
          .then((res) => {
            if (res.statusCode === 200) open++;
            res.body.on('error', () => undefined);
            res.body.resume();
          })
          .catch(() => undefined),
      );
    }
    while (open < idleStreams && performance.now() - t0 < 180_000)
      await new Promise((r) => setTimeout(r, 500));
    await new Promise((r) => setTimeout(r, 2_000));
    const during = await rssKiB(idleCoord.child.pid!);
    ctl.abort();
    await Promise.all(bodies);
    report.idleStreams = {
      requested: idleStreams,
      open,
      rssBeforeMiB: before / 1024,
      rssWithMiB: during / 1024,
    };
    console.log(
      `\nidle streams through the coordinator: ${open}/${idleStreams} open; coordinator RSS ${(before / 1024).toFixed(0)} MiB idle → ` +
        `${(during / 1024).toFixed(0)} MiB with the streams open (${((during - before) / Math.max(1, open)).toFixed(1)} KiB per stream)`,
    );
  }
  // 4. long prompts: coordinator CPU per request vs one parse + stringify of the same body
  if (phases.has('long-prompt')) {
    const profileDir = values['long-profile'];
    // sims of their own: a 1 MiB prompt is ~260k simulated tokens, over the default context and cache
    const longSim = ['--max-model-len', '4000000', '--kv-blocks', '1000000'];
    const [longPre, longDec] = await Promise.all([sim('prefill', longSim), sim('decode', longSim)]);
    const longConfig = {
      ...pdConfig,
      instances: [
        { ...pdConfig.instances[0], url: longPre.url },
        { ...pdConfig.instances[1], url: longDec.url },
      ],
      server: { port: 0, maxBodyBytes: 16 * 2 ** 20 },
    };
    const longTargets: Array<[string, { url: string; pid: number }]> = [
      [
        'motor-pd',
        profileDir
          ? await profiledCoordinator('long-pd', longConfig, profileDir)
          : await coordinator('long-pd', longConfig).then((c) => ({ url: c.url, pid: c.child.pid! })),
      ],
    ];
    if (BASELINE_BIN) {
      const c = await coordinator('long-base-pd', longConfig, BASELINE_BIN);
      longTargets.push(['base-pd', { url: c.url, pid: c.child.pid! }]);
    }
    const tick = clockTick();
    // each coordinator's background CPU (timers, health probes, scrapes) before it has served anything,
    // as a rate: subtracted for the wall time of each round, so a slow round on a loaded machine does
    // not charge it to the requests (measured once: right after a round it would include that round's GC)
    const idleRates = new Map<string, number>();
    for (const [n, c] of longTargets) idleRates.set(n, await idleCpuRate(c.pid, 3000));
    report.longPrompt = {};
    console.log(
      `\nlong prompts (P/D NIXL handoff, prefix-affinity; ${longRequests} non-stream requests ${longConcurrency} at a time per size, target and round after ${longWarmup} warm-up; ` +
        `load ${(await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ')})`,
    );
    console.log('size      target      round  coordinator CPU ms/req  parse+stringify ms  ratio');
    const pools = new Map(
      longTargets.map(([n, c]) => [n, new Pool(c.url, { connections: longConcurrency })]),
    );
    cleanups.push(async () => void (await Promise.all([...pools.values()].map((p) => p.close()))));
    // warm-up: `--long-warmup` small requests per target, so that V8 has optimised the per-request path
    // (after the 10 requests this phase used to send, a 2 KiB P/D request cost 2-3x its warm CPU),
    // then 20 of each size before its rounds
    const small = longChatBody(2048);
    for (const p of pools.values()) await postLongMany(p, small, longWarmup);
    for (const kib of longSizes) {
      const text = longChatBody(kib * 1024);
      for (const p of pools.values()) await postLongMany(p, text, 20);
      const ratios = new Map<string, number[]>(longTargets.map(([n]) => [n, []]));
      const cpu = new Map<string, number[]>(longTargets.map(([n]) => [n, []]));
      const floors: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const floor = parseStringifyMs(text);
        floors.push(floor);
        // targets take turns going first (an identical build measured second read ~1.5× higher)
        for (const [n, c] of r % 2 === 0 ? longTargets : [...longTargets].reverse()) {
          const idleRate = idleRates.get(n)!;
          const t0 = performance.now();
          const before = await cpuTicks(c.pid);
          await postLongMany(pools.get(n)!, text, longRequests);
          const after = await cpuTicks(c.pid);
          const background = (idleRate * (performance.now() - t0)) / longRequests;
          const msPer = (ticks: number): number => (ticks * (1000 / tick)) / longRequests;
          const system = msPer(after.system - before.system);
          const perRequest = Math.max(0, msPer(after.user - before.user) + system - background);
          cpu.get(n)!.push(perRequest);
          ratios.get(n)!.push(perRequest / floor);
          console.log(
            `${`${(text.length / 1024).toFixed(0)} KiB`.padEnd(9)} ${n.padEnd(11)} ${String(r + 1).padStart(5)} ${perRequest.toFixed(2).padStart(23)} ${floor.toFixed(2).padStart(19)} ${(perRequest / floor).toFixed(2).padStart(6)}   (system ${system.toFixed(2)}, background ${background.toFixed(2)} subtracted)`,
          );
        }
      }
      const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const row: Record<string, unknown> = { bytes: text.length, parseStringifyMs: floors };
      for (const [n] of longTargets) {
        row[n] = { cpuMsPerRequest: cpu.get(n), ratio: ratios.get(n), medianRatio: med(ratios.get(n)!) };
        console.log(
          `${(text.length / 1024).toFixed(0)} KiB ${n}: median ratio ${med(ratios.get(n)!).toFixed(2)} (goal ≤ 1.5)`,
        );
      }
      (report.longPrompt as Record<string, unknown>)[`${kib}KiB`] = row;
    }
    if (profileDir) console.log(`coordinator CPU profile: written to ${profileDir} when it stops`);
  }
  if (values.json) await writeFile(values.json, JSON.stringify(report, null, 2));
} finally {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
}
