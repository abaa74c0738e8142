/**
 * End-to-end scheduling benchmark (issue 6): real `motor sim` processes (4 prefill + 2 decode, vLLM
 * handoff in direct mode) behind a real `motor coordinator`, driven by the `motor bench` library on a
 * multi-turn chat workload, once per policy (round-robin, least-load, prefix-affinity). The sims are
 * restarted between policies so every policy starts with empty caches.
 *
 *   npm run bench:scheduling                      # build, then this file
 *   npx tsx scripts/bench/scheduling-e2e.ts --json out.json --conversations 31 --turns 10 --concurrency 16
 *
 * Workload: `shared-prefix` with a short shared system prompt; each conversation's growing history is
 * its own prefix (the previous answer is a seeded synthetic one, the same for every policy). The sims
 * make prefill cost matter (`--prefill-ms-per-token`, few concurrent prefills per instance) and bound
 * their prefix cache (`--kv-blocks`); the prefix-affinity scorer's index mirrors that capacity.
 */
import { writeFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { BenchRun, type TargetResult } from '../../src/loadgen/runner.js';
import { createWorkload } from '../../src/loadgen/workloads.js';
import { spawnMotor, type MotorChild } from '../../src/cluster/motor-child.js';

const { values: flags } = parseArgs({
  options: {
    conversations: { type: 'string', default: '31' },
    turns: { type: 'string', default: '10' },
    cycles: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '16' },
    'system-tokens': { type: 'string', default: '64' },
    'max-tokens': { type: 'string', default: '64' },
    'prefill-ms-per-token': { type: 'string', default: '2' },
    'prefill-max-seqs': { type: 'string', default: '2' },
    'kv-blocks': { type: 'string', default: '1024' },
    'itl-ms': { type: 'string', default: '4' },
    prefills: { type: 'string', default: '4' },
    decodes: { type: 'string', default: '2' },
    policies: { type: 'string', default: 'round-robin,least-load,prefix-affinity' },
    seed: { type: 'string', default: '7' },
    json: { type: 'string' },
  },
});
const n = (k: keyof typeof flags): number => Number(flags[k]);

const MODEL = 'motor-sim-7b';
const KV_BLOCKS = n('kv-blocks');
const NIXL = { kv_connector: 'NixlConnector' };
const POLICIES = String(flags.policies).split(',');

function simArgs(role: 'prefill' | 'decode'): string[] {
  const common = ['sim', '--port', '0', '--role', role, '--model', MODEL, '--record-max', '0'];
  if (role === 'prefill') {
    return [
      ...common,
      '--prefill-ms-per-token',
      String(flags['prefill-ms-per-token']),
      '--prefill-overhead-ms',
      '5',
      '--max-num-seqs',
      String(flags['prefill-max-seqs']),
      '--kv-blocks',
      String(KV_BLOCKS),
    ];
  }
  return [...common, '--itl-ms', String(flags['itl-ms']), '--max-num-seqs', '256', '--kv-blocks', '200000'];
}

function schedulingFor(policy: string): Record<string, unknown> {
  if (policy !== 'prefix-affinity') return { policy };
  // The index mirrors the engines' prefix-cache capacity (16-token blocks).
  return {
    policy,
    prefill: { scorers: [{ type: 'prefix-affinity', params: { capacityBlocks: KV_BLOCKS } }] },
  };
}

async function runPolicy(policy: string): Promise<TargetResult> {
  const children: MotorChild[] = [];
  const dir = await mkdtemp(join(tmpdir(), 'motor-sched-bench-'));
  const spawn = async (args: string[]) => {
    const c = await spawnMotor(args, { timeoutMs: 60_000, maxLogLines: 100 });
    children.push(c);
    return c;
  };
  try {
    const prefills = await Promise.all(
      Array.from({ length: n('prefills') }, () => spawn(simArgs('prefill'))),
    );
    const decodes = await Promise.all(Array.from({ length: n('decodes') }, () => spawn(simArgs('decode'))));
    const instances = [
      ...prefills.map((s, i) => ({
        id: `P${i}`,
        url: s.url,
        role: 'prefill',
        mode: 'direct',
        kvTransferConfig: NIXL,
      })),
      ...decodes.map((s, i) => ({
        id: `D${i}`,
        url: s.url,
        role: 'decode',
        mode: 'direct',
        kvTransferConfig: NIXL,
      })),
    ];
    const file = join(dir, 'motor.yaml');
    await writeFile(
      file,
      stringify({
        server: { port: 0 },
        instances,
        scheduling: schedulingFor(policy),
        timeouts: { firstTokenMs: 120_000 },
      }),
    );
    const coord = await spawn(['coordinator', '--config', file]);
    const conversations = n('conversations');
    const turns = n('turns');
    const workload = createWorkload('shared-prefix', {
      seed: n('seed'),
      promptTokens: n('system-tokens'),
      maxTokens: n('max-tokens'),
      conversations,
      turns,
    });
    const run = new BenchRun({
      target: { name: policy, url: `${coord.url}/v1` },
      model: MODEL,
      workload,
      load: { kind: 'closed', concurrency: n('concurrency') },
      stop: { requests: conversations * turns * n('cycles') },
      stream: true,
      seed: n('seed'),
      timeoutMs: 120_000,
      ignoreEos: true,
    });
    return await run.run();
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await rm(dir, { recursive: true, force: true });
  }
}

const results: TargetResult[] = [];
for (const policy of POLICIES) {
  process.stderr.write(`scheduling bench: ${policy} ...\n`);
  const r = await runPolicy(policy);
  process.stderr.write(
    `  ${r.ok} ok, ${r.failed} failed in ${r.durationS.toFixed(1)} s: ${r.requestsPerS.toFixed(2)} req/s\n`,
  );
  results.push(r);
}

const base = results.find((r) => r.name === 'round-robin') ?? results[0]!;
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const lines = [
  '| policy | ok/failed | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | prefix-cache hit rate | throughput vs RR | hit rate vs RR |',
  '|---|---|---|---|---|---|---|---|---|',
  ...results.map(
    (r) =>
      `| ${r.name} | ${r.ok}/${r.failed} | ${r.requestsPerS.toFixed(2)} | ${r.outputTokensPerS.toFixed(0)} | ` +
      `${r.ttftMs.p50.toFixed(0)} | ${r.ttftMs.p99.toFixed(0)} | ${pct(r.prefixCacheHitRate)} | ` +
      `${(r.requestsPerS / base.requestsPerS).toFixed(2)}× | ${(r.prefixCacheHitRate / base.prefixCacheHitRate).toFixed(2)}× |`,
  ),
];
process.stdout.write(`${lines.join('\n')}\n`);
if (flags.json) {
  await writeFile(flags.json, JSON.stringify({ argv: process.argv.slice(2), flags, results }, null, 2));
}
