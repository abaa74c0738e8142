/**
 * bench:overhead phase 4, long prompts (issue 19): each P/D proxy's CPU per request from /proc next to
 * the floors of the same body timed in this process in the same round (long-prompt-floors.ts), and
 * where that CPU goes — minor page faults per request (priced at this machine's fresh-page cost) and
 * the main thread's share against the other threads'. The proxies and their sims are the caller's.
 */
import { readFile } from 'node:fs/promises';
import { Pool } from 'undici';
import { freshPageUs, jsonFloors, longChatBody } from './long-prompt-floors.js';
import type { Cleanups, Listening } from './overhead-servers.js';
import { clockTick, cpuTicks, idleCpuRate, minorFaults, threadCpuMs } from './proc-stat.js';

export interface LongPromptOptions {
  model: string;
  maxTokens: number;
  sizesKiB: number[];
  requests: number;
  warmup: number;
  concurrency: number;
  rounds: number;
  targets: Array<[string, Listening]>;
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

/** `n` requests of `text` to `pool`, `concurrency` at a time. */
async function postLongMany(pool: Pool, text: string, n: number, concurrency: number): Promise<void> {
  let left = n;
  const worker = async (): Promise<void> => {
    while (left > 0) {
      left--;
      await postLong(pool, text);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, worker));
}

/** One round of one target, per request: CPU (main + other − background), system (stat ticks), threads, faults. */
interface Sample {
  cpuMs: number;
  systemMs: number;
  backgroundMs: number;
  mainMs: number;
  otherMs: number;
  minflt: number;
}

async function measure(pid: number, idleRate: number, run: () => Promise<void>, n: number): Promise<Sample> {
  const t0 = performance.now();
  const [sys0, flt0, thr0] = [(await cpuTicks(pid)).system, await minorFaults(pid), await threadCpuMs(pid)];
  await run();
  const [sys1, flt1, thr1] = [(await cpuTicks(pid)).system, await minorFaults(pid), await threadCpuMs(pid)];
  const backgroundMs = (idleRate * (performance.now() - t0)) / n;
  const mainMs = (thr1.main - thr0.main) / n;
  const otherMs = (thr1.other - thr0.other) / n;
  return {
    cpuMs: Math.max(0, mainMs + otherMs - backgroundMs),
    systemMs: ((sys1 - sys0) * (1000 / clockTick())) / n,
    backgroundMs,
    mainMs,
    otherMs,
    minflt: (flt1 - flt0) / n,
  };
}

const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const num = (x: number, width: number, digits = 2): string => x.toFixed(digits).padStart(width);

export async function runLongPrompt(
  o: LongPromptOptions,
  cleanups: Cleanups,
): Promise<Record<string, unknown>> {
  // each proxy's background CPU (timers, health probes, scrapes) before it has served anything, as a
  // rate: subtracted for the wall time of each round, so a slow round on a loaded machine does not
  // charge it to the requests (measured once: right after a round it would include that round's GC)
  const idleRates = new Map<string, number>();
  for (const [n, c] of o.targets) idleRates.set(n, await idleCpuRate(c.pid, 3000));
  const pageUs = freshPageUs();
  const report: Record<string, unknown> = { freshPageUs: pageUs };
  console.log(
    `\nlong prompts (P/D NIXL handoff, prefix-affinity; ${o.requests} non-stream requests ${o.concurrency} at a time per size, target and round after ${o.warmup} warm-up; ` +
      `load ${(await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ')})`,
  );
  console.log(
    `a fresh page costs ${pageUs.toFixed(1)} µs of CPU here (first touch of 32 MiB minus the second, ÷ its minor faults); ` +
      'main, other: on-CPU ms/req of the proxy main thread and other threads; CPU: their sum minus its idle background; ' +
      'fault ms = minflt/req × that cost; ' +
      'p+s: one JSON.parse + JSON.stringify of the string; bytes: Buffer → utf8 → parse → stringify → Buffer',
  );
  console.log(
    'size      target       round   CPU   main  other  minflt/req  fault ms     p+s   ratio   bytes  ratio',
  );
  const pools = new Map(o.targets.map(([n, c]) => [n, new Pool(c.url, { connections: o.concurrency })]));
  cleanups.push(async () => void (await Promise.all([...pools.values()].map((p) => p.close()))));
  // warm-up: `warmup` small requests per target, so that V8 has optimised the per-request path (after
  // the 10 requests this phase used to send, a 2 KiB P/D request cost 2-3x its warm CPU), then 20 of
  // each size before its rounds
  const small = longChatBody(2048, o.model, o.maxTokens);
  for (const p of pools.values()) await postLongMany(p, small, o.warmup, o.concurrency);
  for (const kib of o.sizesKiB) {
    const text = longChatBody(kib * 1024, o.model, o.maxTokens);
    const label = `${(text.length / 1024).toFixed(0)} KiB`;
    for (const p of pools.values()) await postLongMany(p, text, 20, o.concurrency);
    const samples = new Map<string, Sample[]>(o.targets.map(([n]) => [n, []]));
    const floors: Array<ReturnType<typeof jsonFloors>> = [];
    for (let r = 0; r < o.rounds; r++) {
      const floor = jsonFloors(text);
      floors.push(floor);
      // targets take turns going first (an identical build measured second read ~1.5× higher)
      for (const [n, c] of r % 2 === 0 ? o.targets : [...o.targets].reverse()) {
        const pool = pools.get(n)!;
        const run = (): Promise<void> => postLongMany(pool, text, o.requests, o.concurrency);
        const s = await measure(c.pid, idleRates.get(n)!, run, o.requests);
        samples.get(n)!.push(s);
        console.log(
          `${label.padEnd(9)} ${n.padEnd(11)} ${String(r + 1).padStart(6)} ${num(s.cpuMs, 5)} ${num(s.mainMs, 6)} ${num(s.otherMs, 6)} ` +
            `${num(s.minflt, 11, 0)} ${num((s.minflt * pageUs) / 1000, 9)} ${num(floor.parseStringifyMs, 7, 3)} ${num(s.cpuMs / floor.parseStringifyMs, 7)} ` +
            `${num(floor.bytesMs, 7, 3)} ${num(s.cpuMs / floor.bytesMs, 6)}   (system ${s.systemMs.toFixed(2)}, background ${s.backgroundMs.toFixed(2)} subtracted)`,
        );
      }
    }
    const row: Record<string, unknown> = {
      bytes: text.length,
      parseStringifyMs: floors.map((f) => f.parseStringifyMs),
      bytesFloorMs: floors.map((f) => f.bytesMs),
      bytesFloorMinflt: floors.map((f) => f.bytesMinflt),
    };
    console.log(
      `${label} floors: p+s ${med(floors.map((f) => f.parseStringifyMs)).toFixed(3)} ms, bytes ${med(floors.map((f) => f.bytesMs)).toFixed(3)} ms ` +
        `with ${med(floors.map((f) => f.bytesMinflt)).toFixed(0)} minflt (medians)`,
    );
    for (const [n] of o.targets) {
      const ss = samples.get(n)!;
      const ratios = ss.map((s, i) => s.cpuMs / floors[i]!.parseStringifyMs);
      const bytesRatios = ss.map((s, i) => s.cpuMs / floors[i]!.bytesMs);
      const faultShare = med(
        ss.map((s) => (s.minflt * pageUs) / 1000 / Math.max(1e-9, s.mainMs + s.otherMs)),
      );
      row[n] = {
        cpuMsPerRequest: ss.map((s) => s.cpuMs),
        ratio: ratios,
        medianRatio: med(ratios),
        bytesRatio: bytesRatios,
        medianBytesRatio: med(bytesRatios),
        minfltPerRequest: ss.map((s) => s.minflt),
        mainThreadMsPerRequest: ss.map((s) => s.mainMs),
        otherThreadsMsPerRequest: ss.map((s) => s.otherMs),
        medianFaultShare: faultShare,
      };
      console.log(
        `${label} ${n}: median ratio ${med(ratios).toFixed(2)} (goal ≤ 1.5), over the bytes floor ${med(bytesRatios).toFixed(2)}; ` +
          `${med(ss.map((s) => s.minflt)).toFixed(0)} minflt/req ≈ ${(100 * faultShare).toFixed(0)} % of its CPU; ` +
          `main thread ${med(ss.map((s) => s.mainMs)).toFixed(2)} ms/req, other threads ${med(ss.map((s) => s.otherMs)).toFixed(2)}`,
      );
    }
    report[`${kib}KiB`] = row;
  }
  return report;
}
