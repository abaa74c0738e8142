/**
 * Scheduling simulation (no processes): a shared-prefix multi-turn chat workload replayed over
 * simulated prefill instances, each with an LRU prefix cache and a FIFO token-rate prefill queue.
 * Compares round-robin, least-load and prefix-affinity using the real `Scheduler` (same code path the
 * coordinator will use: selectPair → LoadTracker begin / firstToken / end). Deterministic (seeded).
 *
 *   npx tsx scripts/bench/scheduling-sim.ts [--scenario moderate|saturated|all] [--users N] [--think-ms N]
 *     [--tpot-ms N] [--duration-s N] [--prefills N] [--capacity-blocks N] [--seed N]
 *   PREFIX_PARAMS='{"uncachedTokenWeight":2}' tunes the prefix-affinity scorer.
 *
 * Model (per prefill instance): service time = overheadMs + uncached tokens / prefillTokensPerS +
 * cached tokens / cachedTokensPerS; KV cache = LRU of 16-token blocks with `capacityBlocks`, blocks
 * inserted when the prefill completes, the tail of a prompt evicted first (as vLLM). Decode is not the
 * bottleneck: TTFT = queue wait + prefill + handoffMs; the reply then takes outputTokens × tpotMs.
 * Users are closed-loop: think, send the next turn; after the last turn start a new conversation.
 */
import { parseArgs } from 'node:util';
import type { Clock } from '../../src/common/clock.js';
import {
  Scheduler,
  seededRandom,
  tokenBlockHashes,
  type SchedulableInstance,
} from '../../src/scheduling/index.js';

const { values: args } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'all' },
    users: { type: 'string' },
    'think-ms': { type: 'string' },
    'tpot-ms': { type: 'string' },
    'duration-s': { type: 'string' },
    prefills: { type: 'string' },
    'capacity-blocks': { type: 'string' },
    seed: { type: 'string', default: '1' },
  },
});

/** Workload scenarios; command-line flags override any of them. */
const scenarios = {
  /** Users limit the load (prefill ~75% busy under round-robin): compares latency and hit rate. */
  moderate: { users: 192, thinkMs: 1000, tpotMs: 15, capacityBlocks: 8192, durationS: 300 },
  /** Offered load above every policy's capacity: throughput is each policy's capacity. */
  saturated: { users: 192, thinkMs: 200, tpotMs: 5, capacityBlocks: 16384, durationS: 200 },
};

function workload(name: keyof typeof scenarios) {
  const base = scenarios[name];
  const num = (flag: string | undefined, fallback: number) => (flag === undefined ? fallback : Number(flag));
  return {
    name,
    users: num(args.users, base.users),
    thinkMs: num(args['think-ms'], base.thinkMs),
    durationMs: num(args['duration-s'], base.durationS) * 1000,
    prefills: num(args.prefills, 4),
    capacityBlocks: num(args['capacity-blocks'], base.capacityBlocks),
    seed: Number(args.seed),
    systemPrompts: 8,
    systemTokens: [800, 2000] as const,
    turns: [3, 10] as const,
    userTokens: [30, 250] as const,
    replyTokens: [100, 500] as const,
    blockSize: 16,
    overheadMs: 10,
    prefillTokensPerS: 16_000,
    cachedTokensPerS: 400_000,
    handoffMs: 8,
    tpotMs: num(args['tpot-ms'], base.tpotMs),
  };
}
type Workload = ReturnType<typeof workload>;

// ---------------------------------------------------------------------------------------------------
// Engine prefix cache (independent of the scheduler's approximate index).

class EngineCache {
  private readonly lru = new Map<number, true>();
  constructor(
    private readonly capacity: number,
    private readonly blockSize: number,
  ) {}
  /** Cached leading tokens (≤ promptTokens - 1); touches hits. */
  lookup(hashes: readonly number[], promptTokens: number): number {
    const maxBlocks = Math.floor(Math.max(0, promptTokens - 1) / this.blockSize);
    let hit = 0;
    while (hit < hashes.length && hit < maxBlocks && this.lru.has(hashes[hit]!)) hit++;
    return hit * this.blockSize;
  }
  insert(hashes: readonly number[]): void {
    for (let k = Math.min(hashes.length, this.capacity) - 1; k >= 0; k--) {
      this.lru.delete(hashes[k]!);
      this.lru.set(hashes[k]!, true);
    }
    while (this.lru.size > this.capacity) this.lru.delete(this.lru.keys().next().value as number);
  }
}

// ---------------------------------------------------------------------------------------------------
// Discrete-event core.

class EventQueue {
  private heap: { t: number; seq: number; fn: () => void }[] = [];
  private seq = 0;
  now = 0;
  at(t: number, fn: () => void): void {
    const h = this.heap;
    h.push({ t, seq: this.seq++, fn });
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.t < h[i]!.t || (h[p]!.t === h[i]!.t && h[p]!.seq < h[i]!.seq)) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }
  runUntil(end: number): void {
    const h = this.heap;
    while (h.length > 0 && h[0]!.t <= end) {
      const top = h[0]!;
      const last = h.pop()!;
      if (h.length > 0) {
        h[0] = last;
        let i = 0;
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < h.length && (h[l]!.t < h[m]!.t || (h[l]!.t === h[m]!.t && h[l]!.seq < h[m]!.seq))) m = l;
          if (r < h.length && (h[r]!.t < h[m]!.t || (h[r]!.t === h[m]!.t && h[r]!.seq < h[m]!.seq))) m = r;
          if (m === i) break;
          [h[m], h[i]] = [h[i]!, h[m]!];
          i = m;
        }
      }
      this.now = top.t;
      top.fn();
    }
    this.now = end;
  }
}

interface Job {
  readonly tokens: number[];
  readonly hashes: number[];
  readonly arrivalMs: number;
  readonly done: (ttftMs: number, cached: number) => void;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

// ---------------------------------------------------------------------------------------------------

function policies(W: Workload): Record<string, object> {
  return {
    'round-robin': { prefill: { scorers: [], picker: { type: 'round-robin' } } },
    'least-load': { prefill: { scorers: [{ type: 'least-load' }] } },
    'prefix-affinity': {
      prefill: {
        scorers: [
          {
            type: 'prefix-affinity',
            params: { capacityBlocks: W.capacityBlocks, ...JSON.parse(process.env.PREFIX_PARAMS ?? '{}') },
          },
        ],
      },
    },
  };
}

function simulate(W: Workload, policy: string) {
  const rng = seededRandom(W.seed);
  const uniform = ([lo, hi]: readonly [number, number]) => lo + Math.floor(rng() * (hi - lo + 1));
  const exp = (mean: number) => -Math.log(1 - rng()) * mean;
  const freshTokens = (n: number) => Array.from({ length: n }, () => Math.floor(rng() * 100_000));
  const systems = Array.from({ length: W.systemPrompts }, () => freshTokens(uniform(W.systemTokens)));

  const ev = new EventQueue();
  const clock: Clock = { now: () => ev.now, setTimeout: () => ({}), clearTimeout: () => {} };
  const scheduler = new Scheduler({ ...policies(W)[policy], seed: W.seed }, { clock });
  const instances: SchedulableInstance[] = [
    ...Array.from({ length: W.prefills }, (_, i) => ({
      id: `p${i}`,
      role: 'prefill' as const,
      url: `http://p${i}`,
      dispatch_capabilities: ['prefill_handoff_decode'],
    })),
    ...Array.from({ length: 2 }, (_, i) => ({
      id: `d${i}`,
      role: 'decode' as const,
      url: `http://d${i}`,
      dispatch_capabilities: ['prefill_handoff_decode'],
    })),
  ];
  const engines = new Map(
    instances
      .filter((x) => x.role === 'prefill')
      .map((x) => [
        x.id,
        { cache: new EngineCache(W.capacityBlocks, W.blockSize), queue: [] as Job[], busy: false, busyMs: 0 },
      ]),
  );

  const ttfts: number[] = [];
  let completed = 0;
  let promptTokens = 0;
  let cachedTokens = 0;
  let outputTokens = 0;
  const warmupMs = W.durationMs * 0.1;
  let selectUs = 0;
  let selections = 0;

  const startNext = (id: string) => {
    const engine = engines.get(id)!;
    const job = engine.queue.shift();
    if (!job) {
      engine.busy = false;
      return;
    }
    engine.busy = true;
    const cached = engine.cache.lookup(job.hashes, job.tokens.length);
    const serviceMs =
      W.overheadMs +
      ((job.tokens.length - cached) / W.prefillTokensPerS) * 1000 +
      (cached / W.cachedTokensPerS) * 1000;
    engine.busyMs += serviceMs;
    ev.at(ev.now + serviceMs, () => {
      engine.cache.insert(job.hashes);
      job.done(ev.now - job.arrivalMs + W.handoffMs, cached);
      startNext(id);
    });
  };

  const sendTurn = (history: number[], turnsLeft: number) => {
    history.push(...freshTokens(uniform(W.userTokens)));
    const tokens = history.slice();
    const request = { model: 'm', promptTokenIds: tokens, promptTokens: tokens.length };
    const t0 = process.cpuUsage();
    const decision = scheduler.selectPair(request, instances);
    const cpu = process.cpuUsage(t0);
    selectUs += cpu.user + cpu.system;
    selections++;
    if (decision.kind !== 'pair') throw new Error(`unexpected decision ${decision.kind}`);
    const prefillId = decision.prefill.id;
    const prefillLoad = scheduler.loadTracker.begin(prefillId, {
      promptTokens: tokens.length,
      cachedPromptTokens: decision.cachedPromptTokens,
    });
    const arrivalMs = ev.now;
    const engine = engines.get(prefillId)!;
    engine.queue.push({
      tokens,
      hashes: tokenBlockHashes(tokens, W.blockSize),
      arrivalMs,
      done: (ttftMs, cached) => {
        prefillLoad.firstToken();
        prefillLoad.end('success');
        scheduler.breakers.record(prefillId, 'success');
        const reply = uniform(W.replyTokens);
        if (arrivalMs >= warmupMs) {
          ttfts.push(ttftMs);
          completed++;
          promptTokens += tokens.length;
          cachedTokens += cached;
          outputTokens += reply;
        }
        history.push(...freshTokens(reply));
        const nextAt = ev.now + W.handoffMs + reply * W.tpotMs + exp(W.thinkMs);
        if (turnsLeft > 1) ev.at(nextAt, () => sendTurn(history, turnsLeft - 1));
        else ev.at(nextAt, () => startConversation());
      },
    });
    if (!engine.busy) startNext(prefillId);
  };

  const startConversation = () => {
    const system = systems[Math.floor(rng() * systems.length)]!;
    sendTurn(system.slice(), uniform(W.turns));
  };

  for (let u = 0; u < W.users; u++) ev.at(exp(W.thinkMs * 2), startConversation);
  ev.runUntil(W.durationMs);

  ttfts.sort((a, b) => a - b);
  const measuredS = (W.durationMs - warmupMs) / 1000;
  const utilisation = [...engines.values()].map((e) => e.busyMs / W.durationMs);
  return {
    policy,
    requests: completed,
    throughputRps: completed / measuredS,
    promptTokPerS: promptTokens / measuredS,
    outputTokPerS: outputTokens / measuredS,
    hitRate: promptTokens > 0 ? cachedTokens / promptTokens : 0,
    ttftP50: percentile(ttfts, 50),
    ttftP99: percentile(ttfts, 99),
    utilisation,
    selectUs: selectUs / selections,
  };
}

const names =
  args.scenario === 'all'
    ? (Object.keys(scenarios) as (keyof typeof scenarios)[])
    : [args.scenario as keyof typeof scenarios];
for (const name of names) {
  if (!(name in scenarios))
    throw new Error(`unknown scenario ${name} (known: ${Object.keys(scenarios).join(', ')}, all)`);
  const W = workload(name);
  console.log(
    `\n[${name}] ${W.users} closed-loop users, think ${W.thinkMs} ms, ${W.systemPrompts} shared system prompts ` +
      `${W.systemTokens.join('-')} tok, ${W.turns.join('-')} turns, user ${W.userTokens.join('-')} tok, reply ` +
      `${W.replyTokens.join('-')} tok at ${W.tpotMs} ms/tok; ${W.prefills} prefill instances × ${W.capacityBlocks} ` +
      `blocks of ${W.blockSize}; prefill ${W.prefillTokensPerS} tok/s; ${W.durationMs / 1000} s simulated (first 10% warm-up)`,
  );
  const results = Object.keys(policies(W)).map((policy) => simulate(W, policy));
  const rr = results[0]!;
  const rows = results.map((r) => [
    r.policy,
    r.throughputRps.toFixed(2),
    `${(r.throughputRps / rr.throughputRps).toFixed(2)}×`,
    r.promptTokPerS.toFixed(0),
    `${(r.hitRate * 100).toFixed(1)}%`,
    `${(r.hitRate / rr.hitRate).toFixed(2)}×`,
    r.ttftP50.toFixed(0),
    r.ttftP99.toFixed(0),
    r.utilisation.map((u) => u.toFixed(2)).join('/'),
    r.selectUs.toFixed(1),
  ]);
  const header = [
    'policy',
    'req/s',
    'vs RR',
    'prompt tok/s',
    'hit rate',
    'vs RR',
    'TTFT p50 ms',
    'TTFT p99 ms',
    'prefill busy',
    'select cpu µs',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [header, ...rows]) console.log(row.map((c, i) => c.padEnd(widths[i]!)).join('  '));
}
