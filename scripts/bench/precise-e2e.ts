/**
 * Precise vs approximate KV routing end to end (issue 17 item 8 and its Done-when numbers): real
 * `motor sim` processes (prefills + decodes, vLLM NIXL handoff in direct mode) tokenising with the
 * Qwen3 tokenizer and hashing blocks as vLLM does, the prefills publishing KV events; real
 * `motor coordinator`s; the `motor bench` library as the client. Per run:
 *
 * 1. shared-prefix multi-turn chat, one coordinator per policy (precise-prefix on the events and its
 *    own in-flight routes, precise-events on the events alone, approximate prefix-affinity on routed
 *    history, least-load, round-robin), sims restarted between;
 * 2. a multi-turn Mooncake-format trace (precise-trace.ts, deterministic) replayed at its arrivals,
 *    the same policies;
 * 3. approximate and precise again on the chat workload with two coordinator replicas behind a
 *    round-robin HTTP proxy; after precise's run, a sequential check of predicted = reported cached
 *    tokens (precise-check.ts).
 *
 * Conversation and session counts are odd on purpose: turns go out turn-major, so with an even count
 * round-robin (over 2 prefills, or the proxy over 2 coordinators) would by coincidence send every turn
 * of a conversation to the same place (docs/BENCHMARKS.md, Scheduling).
 *
 * Each phase reports the prefix-cache hit rate (cached_tokens ÷ prompt_tokens from usage) beside three
 * offline references over the same requests at the same per-instance capacity (an infinite cache, a
 * pooled LRU of the fleet's capacity, earliest-finish placement), TTFT p50/p99 and req/s.
 *
 *   npm run bench:precise                                   # build, then this file, 3 runs
 *   npx tsx scripts/bench/precise-e2e.ts --runs 1 --json out.json
 *   npx tsx scripts/bench/precise-e2e.ts --routing-sync redis://127.0.0.1:6379   # replicas share state
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createTraceWorkload, traceArrivals } from '../../src/loadgen/mooncake-trace.js';
import { BenchRun, type LoadShape, type TargetResult } from '../../src/loadgen/runner.js';
import { createWorkload, type BenchRequest, type Workload } from '../../src/loadgen/workloads.js';
import {
  engineReferences,
  predictionCheck,
  startBlockKeys,
  watchEvents,
  type PredictionCheck,
} from './precise-check.js';
import { MODEL, POLICIES, startFleet, type Policy, type SimSizing } from './precise-fleet.js';
import { multiTurnTrace } from './precise-trace.js';

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    phases: { type: 'string', default: 'chat,trace,replicas' },
    'replica-workloads': { type: 'string', default: 'chat' },
    policies: { type: 'string', default: POLICIES.join(',') },
    prefills: { type: 'string', default: '2' },
    decodes: { type: 'string', default: '1' },
    'kv-blocks': { type: 'string', default: '512' },
    'prefill-ms-per-token': { type: 'string', default: '0.3' },
    'prefill-max-seqs': { type: 'string', default: '1' },
    'max-num-batched-tokens': { type: 'string' },
    'itl-ms': { type: 'string', default: '4' },
    conversations: { type: 'string', default: '9' },
    turns: { type: 'string', default: '6' },
    'system-tokens': { type: 'string', default: '400' },
    'max-tokens': { type: 'string', default: '32' },
    concurrency: { type: 'string', default: '4' },
    sessions: { type: 'string', default: '9' },
    'trace-turns': { type: 'string', default: '4' },
    'gap-ms': { type: 'string', default: '200' },
    'time-scale': { type: 'string', default: '1' },
    'predict-requests': { type: 'string', default: '24' },
    seed: { type: 'string', default: '7' },
    json: { type: 'string' },
    /** Redis URL: the two-replica phase shares routing state through it (coordinator `routingSync`). */
    'routing-sync': { type: 'string' },
  },
});
const n = (k: keyof typeof flags): number => Number(flags[k]);

const sizing: SimSizing = {
  prefills: n('prefills'),
  decodes: n('decodes'),
  kvBlocks: n('kv-blocks'),
  prefillMsPerToken: n('prefill-ms-per-token'),
  prefillMaxSeqs: n('prefill-max-seqs'),
  itlMs: n('itl-ms'),
  maxNumBatchedTokens: flags['max-num-batched-tokens'] === undefined ? null : n('max-num-batched-tokens'),
};
const policies = String(flags.policies).split(',') as Policy[];

interface Phase {
  name: string;
  workload: Workload;
  load: LoadShape;
  requests: number;
}

const chat: Phase = {
  name: 'chat',
  workload: createWorkload('shared-prefix', {
    seed: n('seed'),
    promptTokens: n('system-tokens'),
    maxTokens: n('max-tokens'),
    conversations: n('conversations'),
    turns: n('turns'),
  }),
  load: { kind: 'closed', concurrency: n('concurrency') },
  requests: n('conversations') * n('turns'),
};
const records = multiTurnTrace({
  sessions: n('sessions'),
  turns: n('trace-turns'),
  gapMs: n('gap-ms'),
  seed: n('seed'),
  outputLength: n('max-tokens'),
});
const trace: Phase = {
  name: 'trace',
  workload: createTraceWorkload(records, { seed: n('seed'), maxTokensCap: n('max-tokens') }),
  load: { kind: 'trace', arrivalsMs: traceArrivals(records, n('time-scale')) },
  requests: records.length,
};
// the check's own conversations (another seed): sent after the replicas' load run
const checkWorkload = createWorkload('shared-prefix', {
  seed: n('seed') + 1,
  promptTokens: n('system-tokens'),
  maxTokens: 8,
  conversations: 3,
  turns: Math.max(1, Math.ceil(n('predict-requests') / 3)),
});

const requestsOf = (p: Phase): BenchRequest[] =>
  Array.from({ length: p.requests }, (_, i) => p.workload.request(i));

async function measure(url: string, name: string, p: Phase): Promise<TargetResult> {
  const run = new BenchRun({
    target: { name, url: `${url}/v1` },
    model: MODEL,
    workload: p.workload,
    load: p.load,
    stop: { requests: p.requests },
    stream: true,
    seed: n('seed'),
    timeoutMs: 120_000,
    ignoreEos: true,
  });
  return run.run();
}

interface Row {
  run: number;
  phase: string;
  policy: string;
  replicas: number;
  ok: number;
  failed: number;
  hitRate: number;
  infiniteHitRate: number;
  pooledHitRate: number;
  earliestFinishHitRate: number;
  ttftP50: number;
  ttftP99: number;
  reqPerS: number;
}

const keys = await startBlockKeys();
const referenceFleet = {
  instances: sizing.prefills,
  capacityBlocks: sizing.kvBlocks,
  prefillMsPerToken: sizing.prefillMsPerToken,
};
const references = {
  chat: await engineReferences(keys, requestsOf(chat), referenceFleet),
  trace: await engineReferences(
    keys,
    requestsOf(trace),
    referenceFleet,
    trace.load.kind === 'trace' ? trace.load.arrivalsMs : undefined,
  ),
};
const dir = await mkdtemp(join(tmpdir(), 'motor-precise-bench-'));
const rows: Row[] = [];
const checks: Array<PredictionCheck & { run: number }> = [];
const loads: number[][] = [];

async function phase(run: number, p: Phase, policy: Policy, replicas: 1 | 2): Promise<void> {
  const label = `${p.name} ${policy}${replicas === 2 ? ' ×2' : ''}`;
  process.stderr.write(`run ${run}: ${label} ...`);
  const fleet = await startFleet(policy, replicas, sizing, dir, flags['routing-sync']);
  const wantsCheck = policy === 'precise' && replicas === 2 && p === chat;
  const hub = wantsCheck ? watchEvents(fleet) : null;
  try {
    const r = await measure(fleet.url, label, p);
    rows.push({
      run,
      phase: p.name,
      policy,
      replicas,
      ok: r.ok,
      failed: r.failed,
      hitRate: r.prefixCacheHitRate,
      infiniteHitRate: references[p.name as 'chat' | 'trace'].infinite,
      pooledHitRate: references[p.name as 'chat' | 'trace'].pooledLru,
      earliestFinishHitRate: references[p.name as 'chat' | 'trace'].earliestFinish,
      ttftP50: r.ttftMs.p50,
      ttftP99: r.ttftMs.p99,
      reqPerS: r.requestsPerS,
    });
    process.stderr.write(` ${r.ok} ok, ${r.failed} failed, hit ${(r.prefixCacheHitRate * 100).toFixed(1)}%`);
    if (hub) {
      const requests = Array.from({ length: n('predict-requests') }, (_, i) => checkWorkload.request(i));
      const c = await predictionCheck(fleet, hub, keys, requests);
      checks.push({ run, ...c });
      process.stderr.write(`; predicted = reported ${c.exact}/${c.requests}`);
    }
    process.stderr.write('\n');
  } finally {
    await hub?.close();
    await fleet.close();
  }
}

try {
  for (let run = 1; run <= n('runs'); run++) {
    loads.push(loadavg());
    const wanted = String(flags.phases).split(',');
    for (const p of [chat, trace].filter((x) => wanted.includes(x.name)))
      for (const policy of policies) await phase(run, p, policy, 1);
    if (wanted.includes('replicas'))
      for (const p of [chat, trace].filter((x) =>
        String(flags['replica-workloads']).split(',').includes(x.name),
      ))
        for (const policy of policies.filter((x) => x === 'approximate' || x.startsWith('precise')))
          await phase(run, p, policy, 2);
  }
} finally {
  await keys.close();
  await rm(dir, { recursive: true, force: true });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const groups = new Map<string, Row[]>();
for (const r of rows) {
  const k = `${r.phase}|${r.policy}|${r.replicas}`;
  groups.set(k, [...(groups.get(k) ?? []), r]);
}
const lines = [
  `load average at each run's start: ${loads.map((l) => l.map((x) => x.toFixed(2)).join(' ')).join(' | ')}`,
  '',
  '| workload | policy | coordinators | ok/failed | hit rate (median; per run) | infinite cache | pooled LRU | earliest finish | TTFT p50 ms | TTFT p99 ms | req/s |',
  '|---|---|---|---|---|---|---|---|---|---|---|',
  ...[...groups.values()].map((g) => {
    const f = g[0]!;
    const hit = median(g.map((r) => r.hitRate));
    return (
      `| ${f.phase} | ${f.policy} | ${f.replicas} | ${g.reduce((s, r) => s + r.ok, 0)}/${g.reduce((s, r) => s + r.failed, 0)} | ` +
      `${pct(hit)} (${g.map((r) => pct(r.hitRate)).join(', ')}) | ${pct(f.infiniteHitRate)} | ${pct(f.pooledHitRate)} | ${pct(f.earliestFinishHitRate)} | ` +
      `${median(g.map((r) => r.ttftP50)).toFixed(0)} | ${median(g.map((r) => r.ttftP99)).toFixed(0)} | ${median(g.map((r) => r.reqPerS)).toFixed(2)} |`
    );
  }),
  '',
  ...checks.map(
    (c) =>
      `run ${c.run}: predicted = reported cached tokens on ${c.exact}/${c.requests} requests ` +
      `(${pct(c.exact / c.requests)}); routed to a longest predicted prefix ${c.longest}/${c.requests}; cache hits ${c.hits}`,
  ),
];
process.stdout.write(`${lines.join('\n')}\n`);
if (flags.json)
  await writeFile(
    flags.json,
    JSON.stringify({ argv: process.argv.slice(2), flags, loads, references, rows, checks }, null, 2),
  );
