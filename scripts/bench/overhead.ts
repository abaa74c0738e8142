/**
 * What Motor costs on top of an engine, in one run (docs/BENCHMARKS.md "Overhead"), next to floors
 * that say how much of each gap any proxy would pay:
 *   `direct`       `motor sim` directly (union role);
 *   `motor-single` Motor single-instance (coordinator → union sim, direct mode);
 *   `motor-pd`     Motor P/D handoff (coordinator → prefill sim + decode sim, vLLM NIXL);
 *   `direct-pd`    (latency only) this process makes the two engine calls any P/D proxy must make, to
 *                  the same prefill and decode sims, shaped as Motor's legs (pd-legs.ts): the prefill
 *                  (`max_tokens: 1`, non-stream, `kv_transfer_params.do_remote_decode`), then the decode
 *                  with the prefill answer's `kv_transfer_params` — the decode sim pulling KV from the
 *                  prefill sim over HTTP is engine time, so P/D's floor is `direct-pd`, not `direct`;
 *   `node-min`     the floor of any Node.js proxy (node-min.ts: http.createServer + undici, the body
 *                  piped through unparsed) to the union sim;
 *   `node-min-pd`  the floor of a Node P/D proxy (node-min.ts: parse, prefill leg, parse its answer,
 *                  decode leg, pipe the answer) to the P/D sims;
 *   `nginx`        nginx `proxy_pass` to the union sim (skipped with a message when not installed);
 *   `base-*`       `--baseline` builds' coordinators on the same sims.
 * All sims run with `--time-scale 0`, so model time is zero and every difference is proxy cost.
 * Issue 19's goals: single added p50 ≤ nginx's + 0.15 ms; P/D added p50 ≤ 0.5 ms over direct;
 * throughput single ≥ 70 % of nginx, P/D ≥ 35 %; long prompt CPU ≤ 1.5× one parse + stringify.
 *
 * 1. Added latency per request: sequential requests (concurrency 1) after `--warmup` requests per
 *    target and mode, targets alternating round by round; p50/p99 over all samples, minus direct
 *    ("added"); P/D targets also minus direct-pd ("over direct-pd": what the proxy adds to the
 *    engine calls it cannot avoid). Non-stream and stream.
 * 2. Max throughput with wrk (servers pinned to core 0, wrk to core 1 with taskset): non-stream, and
 *    streaming with 1,000 concurrent streams; and each proxy's own CPU per request from /proc (steady
 *    under load); each target's req/s as a share of nginx's.
 * 3. Memory of N concurrent idle streams through the coordinator (sim with a 10-minute ITL: the
 *    first token arrives, then the stream idles): coordinator RSS before and with N open.
 * 4. Long prompts (issue 19, phase `long-prompt`, overhead-long-prompt.ts): a P/D coordinator of its
 *    own (direct NIXL handoff, default prefix-affinity scheduling) and a node-min-pd on the same
 *    prefill and decode sims; `--long-requests` non-stream requests (`--long-concurrency` at a time,
 *    default 1, after `--long-warmup`) of each chat body size (`--long-sizes`, KiB). Per round and
 *    target: the proxy's on-CPU time per request, split into the main thread (tid = pid, the event
 *    loop) and the other threads (GC helpers, libuv, compiler), from /proc/<pid>/task/<tid>/schedstat
 *    (ns; the utime+stime of /proc/<pid>/stat this phase used before is the same time in 10 ms ticks,
 *    too coarse for small bodies); `CPU` = main + other − the proxy's idle background for the round's
 *    wall time; its minor page faults per request (/proc/<pid>/stat field 10) priced at this
 *    machine's fresh-page CPU cost (measured in this process: first touch of a fresh buffer minus
 *    the second); and two floors timed in this process in the same round: `p+s`, one `JSON.parse` +
 *    `JSON.stringify` of the body string (the goal's 1.5× is against it), and `bytes`, Buffer →
 *    `toString('utf8')` → parse → stringify → `Buffer.from` (what a proxy does socket to socket,
 *    faults included). Ratios per round, medians over `--rounds`. `--long-profile DIR` runs the
 *    coordinator under `node --cpu-prof` (profile written to DIR when it stops).
 *
 * Prerequisites (the script installs nothing): `apt-get install -y nginx wrk`.
 *   npm run bench:overhead -- [--rounds 5] [--requests 200] [--warmup 2000] [--duration 5] [--tput-runs 3]
 *     [--idle-streams 9900] [--phases latency,throughput,idle,long-prompt] [--json report.json] [--baseline DIR] [--motor DIR]
 *     [--long-sizes 225,1024] [--long-requests 60] [--long-warmup 2000] [--long-concurrency 1]
 *     [--long-profile DIR]
 *   --motor DIR: the built checkout whose coordinators are the motor-* targets (default: this one).
 *   --baseline DIR: another built checkout of Motor (e.g. `git worktree add ../base <commit> && npm ci`
 *   there); its coordinators run as extra targets `base-single` / `base-pd` on the same sims, so a
 *   change is compared with its parent side by side in one run.
 *   (the npm script builds first; or: npx tsx scripts/bench/overhead.ts …)
 * Folds in the former bench/coordinator-overhead.ts (its sequential latency comparison is step 1).
 */
import { execFileSync } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';
import { runLatency, type Send } from './overhead-latency.js';
import { runLongPrompt } from './overhead-long-prompt.js';
import {
  TASKSET,
  benchSimArgs,
  nodeMin,
  pin,
  profiledCoordinator,
  startNginx,
  which,
  type Cleanups,
  type Listening,
} from './overhead-servers.js';
import { decodeLeg, engineRequestId, prefillLeg } from './pd-legs.js';
import { cpuMs, rssKiB } from './proc-stat.js';

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
    motor: { type: 'string' },
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

const WRK = which('wrk');

const clientBody = (stream: boolean): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'How much latency does a coordinator add per request?' }],
  max_tokens: maxTokens,
  stream,
});
const body = (stream: boolean): string => JSON.stringify(clientBody(stream));

const cleanups: Cleanups = [];
const dir = await mkdtemp(join(tmpdir(), 'motor-overhead-'));
cleanups.push(() => rm(dir, { recursive: true, force: true }));

// --motor DIR: the built checkout whose coordinators are the motor-* targets (default: this one)
const MOTOR_BIN = values.motor ? join(values.motor, 'bin', 'motor.js') : undefined;
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
const sim = (role: string, extra: string[] = []): Promise<MotorChild> => motor(benchSimArgs(role, extra));
async function configFile(name: string, config: Record<string, unknown>): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, stringify({ server: { port: 0 }, ...config }));
  return file;
}
async function coordinator(name: string, config: Record<string, unknown>, bin?: string): Promise<MotorChild> {
  return motor(['coordinator', '--config', await configFile(name, config)], bin ?? MOTOR_BIN);
}

const PATH = '/v1/chat/completions';
function checkAnswer(status: number, text: string, stream: boolean): void {
  if (status !== 200 || (stream && !text.endsWith('data: [DONE]\n\n')))
    throw new Error(`unexpected answer ${status}: ${text.slice(0, 200)}`);
}
/** One request through a proxy (or to the sim), ms. */
async function one(pool: Pool, stream: boolean): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({
    method: 'POST',
    path: PATH,
    headers: { 'content-type': 'application/json' },
    body: body(stream),
  });
  const text = await res.body.text();
  const ms = performance.now() - t0;
  checkAnswer(res.statusCode, text, stream);
  return ms;
}
/** `direct-pd`: the prefill leg, then the decode leg with its answer's kv_transfer_params, from here; ms. */
async function onePd(pre: Pool, dec: Pool, stream: boolean): Promise<number> {
  const client = clientBody(stream);
  const t0 = performance.now();
  const id = engineRequestId();
  const p = await pre.request(prefillLeg(client, id, PATH));
  const answer = await p.body.text();
  checkAnswer(p.statusCode, answer, false);
  const res = await dec.request(decodeLeg(client, id, PATH, JSON.parse(answer)));
  const text = await res.body.text();
  const ms = performance.now() - t0;
  checkAnswer(res.statusCode, text, stream);
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
  const [nginx, nodeMinSingle, nodeMinPd] = await Promise.all([
    startNginx(union.url, dir, cleanups),
    nodeMin([union.url], cleanups),
    nodeMin([pre.url, dec.url], cleanups),
  ]);
  if (!nginx) console.log('nginx not found: skipping (d). Install it with `apt-get install -y nginx`.');
  // the targets with a URL (every phase but long-prompt); direct-pd has none: it is this process
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
    ['node-min', nodeMinSingle.url],
    ['node-min-pd', nodeMinPd.url],
    ...(nginx ? ([['nginx', nginx.url]] as Array<[string, string]>) : []),
  ];

  // 1. added latency (sequential; alternating rounds)
  if (phases.has('latency')) {
    const pools = new Map(targets.map(([n, u]) => [n, new Pool(u, { connections: 1 })]));
    const prePool = new Pool(pre.url, { connections: 1 });
    const decPool = new Pool(dec.url, { connections: 1 });
    cleanups.push(
      async () => void (await Promise.all([...pools.values(), prePool, decPool].map((p) => p.close()))),
    );
    const sends: Array<[string, Send]> = targets.map(([n]) => [n, (stream) => one(pools.get(n)!, stream)]);
    const afterPd = sends.findIndex(([n]) => n === 'motor-pd') + 1;
    sends.splice(afterPd, 0, ['direct-pd', (stream) => onePd(prePool, decPool, stream)]);
    report.latency = await runLatency({
      targets: sends,
      pdTargets: new Set(['motor-pd', 'base-pd', 'node-min-pd']),
      warmup,
      rounds,
      requests,
      maxTokens,
    });
  }

  // 2. throughput (servers on core 0, wrk on core 1)
  if (!phases.has('throughput')) {
    // skipped
  } else if (!WRK)
    console.log('\nwrk not found: skipping throughput. Install it with `apt-get install -y wrk`.');
  else {
    // every coordinator on core 0 (the baseline's too: unpinned it would share wrk's core)
    const servers = [union, pre, dec, single, pd, baseSingle, basePd]
      .filter((c) => c !== null)
      .map((c) => c.child.pid!)
      .concat([nodeMinSingle.pid, nodeMinPd.pid]);
    for (const pid of servers) pin(pid, '0');
    pin(nginx?.proc.pid, '0');
    if (nginx)
      execFileSync('sh', [
        '-c',
        `for p in $(pgrep -P ${nginx.proc.pid}); do taskset -a -cp 0 $p >/dev/null; done`,
      ]);
    // One wrk run swings by ±30 % on this shared machine: targets take turns, run after run, and
    // the median run of each counts (every run's req/s is kept in the report).
    // Proxy CPU per request (the target's own processes, /proc): unlike req/s it barely moves when
    // other work shares the machine. direct: the sim; motor-*, node-min*: the proxy; nginx: its workers.
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
      'node-min': [nodeMinSingle.pid],
      'node-min-pd': [nodeMinPd.pid],
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
          // a run that completed nothing (1,000 streams on a loaded machine) has no CPU per request
          const cpuUsPerReq =
            w.requests > 0 ? (((await cpuMs(pidsOf[n] ?? [])) - cpu0) * 1000) / w.requests : NaN;
          runs.get(n)!.push({ ...w, cpuUsPerReq });
        }
      tput[mode] = {};
      for (const [n, rs] of runs) {
        const median = [...rs].sort((a, b) => a.rps - b.rps)[Math.floor(rs.length / 2)]!;
        const cpus = rs.map((x) => x.cpuUsPerReq).filter((x) => !Number.isNaN(x));
        cpus.sort((a, b) => a - b);
        tput[mode][n] = {
          ...median,
          cpuUsPerReq: cpus[Math.floor(cpus.length / 2)] ?? NaN,
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
    for (const pid of servers) pin(pid, '0,1');
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
  // 4. long prompts: each P/D proxy's CPU per request, where it goes, and the floors of the same body
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
    const longTargets: Array<[string, Listening]> = [
      [
        'motor-pd',
        profileDir
          ? await profiledCoordinator(await configFile('long-pd', longConfig), profileDir, cleanups)
          : await coordinator('long-pd', longConfig).then((c) => ({ url: c.url, pid: c.child.pid! })),
      ],
      ['node-min-pd', await nodeMin([longPre.url, longDec.url], cleanups)],
    ];
    if (BASELINE_BIN) {
      const c = await coordinator('long-base-pd', longConfig, BASELINE_BIN);
      longTargets.push(['base-pd', { url: c.url, pid: c.child.pid! }]);
    }
    report.longPrompt = await runLongPrompt(
      {
        model: MODEL,
        maxTokens,
        sizesKiB: values['long-sizes'].split(',').map(Number),
        requests: Number(values['long-requests']),
        warmup: Number(values['long-warmup']),
        concurrency: Number(values['long-concurrency']),
        rounds,
        targets: longTargets,
      },
      cleanups,
    );
    if (profileDir) console.log(`coordinator CPU profile: written to ${profileDir} when it stops`);
  }
  if (values.json) await writeFile(values.json, JSON.stringify(report, null, 2));
} finally {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
}
