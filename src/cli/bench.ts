import { InvalidArgumentError, Option, type Command } from 'commander';
import { EXIT_UNAVAILABLE } from './cli-error.js';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { intArg, numberArg } from './number-arg.js';
import { commandLine, environmentFacts, type BenchReport } from '../loadgen/json-report.js';
import { startProgress } from '../loadgen/progress.js';
import type { LoadShape, StopCondition, Target, TargetResult } from '../loadgen/runner.js';
import { formatSummary } from '../loadgen/summary-table.js';
import { renderSvg } from '../loadgen/svg-chart.js';
import {
  MOONCAKE_BLOCK_TOKENS,
  createTraceWorkload,
  parseMooncakeTrace,
  traceArrivals,
  type TraceRecord,
} from '../loadgen/mooncake-trace.js';
import { cacheReferences, type CacheReferences } from '../loadgen/cache-references.js';
import { WORKLOAD_NAMES, createWorkload, type Workload, type WorkloadName } from '../loadgen/workloads.js';

interface BenchFlags {
  url: string[];
  compare?: string;
  model?: string;
  apiKey?: string;
  workload: WorkloadName;
  concurrency?: number;
  rate?: number;
  duration?: number;
  requests?: number;
  warmup?: StopCondition;
  maxTokens?: number;
  promptTokens?: number;
  conversations?: number;
  turns?: number;
  stream: boolean;
  seed: number;
  timeout: number;
  ignoreEos?: boolean;
  json?: string;
  svg?: string;
  title?: string;
  progress: boolean;
  trace?: string;
  traceFormat: 'mooncake';
  timeScale: number;
  referenceInstances?: number;
  referenceCapacity: number;
  referencePrefillMs: number;
  referenceMsPerToken: number;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `30s`, `2m`, `500ms`, `1h`, or a bare number of seconds → milliseconds. */
export function parseDuration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) throw new InvalidArgumentError('expected a duration like 30s, 2m, 500ms');
  const ms = Number(m[1]) * UNITS[m[2] ?? 's']!;
  if (!(ms > 0)) throw new InvalidArgumentError('duration must be > 0');
  return ms;
}

/** `--warmup 20` = 20 requests, `--warmup 5s` = five seconds. */
function parseWarmup(v: string): StopCondition {
  if (/^\d+$/.test(v.trim())) return { requests: Number(v) };
  return { durationMs: parseDuration(v) };
}

function checkUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new InvalidArgumentError(`not an http(s) URL: ${raw}`);
  }
  return raw;
}

/** `--url` (repeatable) and `--compare name=url,…` → named targets, in order. */
export function parseTargets(urls: string[], compare: string | undefined): Target[] {
  const targets: Target[] = [];
  for (const url of urls) targets.push({ name: urls.length === 1 ? 'target' : new URL(url).host, url });
  for (const part of (compare ?? '').split(',').filter((p) => p.trim() !== '')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`--compare expects name=url, got "${part}"`);
    targets.push({ name: part.slice(0, eq).trim(), url: checkUrl(part.slice(eq + 1).trim()) });
  }
  const seen = new Set<string>();
  for (const t of targets) {
    if (seen.has(t.name)) throw new InvalidArgumentError(`duplicate target name "${t.name}"`);
    seen.add(t.name);
  }
  return targets;
}

const pkgVersion = (): string =>
  (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;

/** `motor bench`: OpenAI-compatible load generator (docs/motor-bench.md; flags in docs/cli.md). */
export function registerBench(program: Command): void {
  program
    .command('bench')
    .description(
      'load-test OpenAI-compatible endpoints: latency percentiles, throughput, errors, JSON/SVG reports',
    )
    .option(
      '--url <url>',
      'OpenAI base URL to load (e.g. http://127.0.0.1:8000/v1; a bare origin gets /v1), repeatable; targets are named target, or host:port when there are several',
      (v: string, p: string[]) => [...p, checkUrl(v)],
      [],
    )
    .option('--compare <targets>', 'several named targets run one after another: name=url,name=url')
    .option('--model <name>', "model name (default: the first model of each target's /v1/models)")
    .option('--api-key <key>', 'sent as Authorization: Bearer (default: $OPENAI_API_KEY)')
    .addOption(
      new Option('--workload <name>', 'request mix').choices([...WORKLOAD_NAMES]).default('short-chat'),
    )
    .option(
      '--concurrency <n>',
      'closed loop: N requests in flight, each worker sending its next when the last ends (default 8 unless --rate)',
      intArg('--concurrency', 1),
    )
    .option(
      '--rate <r>',
      'open loop: Poisson arrivals at R requests/s (seeded)',
      numberArg('--rate', { exclusiveMin: true }),
    )
    .option(
      '--duration <time>',
      'measure for this long: 30s, 2m, 500ms, bare number = seconds; in-flight requests finish and count (default 30s unless --requests)',
      parseDuration,
    )
    .option(
      '--requests <n>',
      'measure this many requests (with --duration: whichever ends first)',
      intArg('--requests', 1),
    )
    .option(
      '--warmup <n|time>',
      'warm-up before measuring, discarded (same load shape, other prompts): a request count (20) or a time (5s)',
      parseWarmup,
    )
    .option(
      '--max-tokens <n>',
      'output tokens per request (default: short-chat 64, long-prompt 16, shared-prefix 64); with --trace the cap on output_length (default 1024)',
      intArg('--max-tokens', 1),
    )
    .option(
      '--prompt-tokens <n>',
      'approx. prompt length: user prompt (short-chat 40, long-prompt 3000, ±50%) or shared system prompt (shared-prefix 2000)',
      intArg('--prompt-tokens', 1),
    )
    .option(
      '--conversations <n>',
      'shared-prefix: conversations per cycle (default 8)',
      intArg('--conversations', 1),
    )
    .option('--turns <n>', 'shared-prefix: turns per conversation (default 4)', intArg('--turns', 1))
    .option('--stream', 'streaming requests over SSE (the default)', true)
    .option('--no-stream', 'non-streaming requests (TTFT = end-to-end latency)')
    .option(
      '--seed <n>',
      'seed of the workload and of the arrival process',
      (v: string) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('--seed must be an integer ≥ 0');
        return n;
      },
      1,
    )
    .addOption(
      // shown as a duration, as it is given (`--timeout 30s`), not as the milliseconds it becomes
      new Option('--timeout <time>', 'per-request bound on waiting for headers and between body chunks')
        .argParser(parseDuration)
        .default(300_000, '300s'),
    )
    .option('--ignore-eos', 'send ignore_eos:true (vLLM/SGLang) so every output reaches --max-tokens')
    .option(
      '--json <file>',
      'write the report as JSON: exact command line, settings, environment (Node, CPUs, memory, load), results',
    )
    .option(
      '--svg <file>',
      'write an SVG chart comparing the targets: TTFT / ITL / E2E p50-p90-p99, requests/s, tokens/s, cache hits',
    )
    .option('--title <text>', 'SVG chart title (default: motor bench — <workload>)')
    .option('--no-progress', 'no progress output on stderr')
    .option(
      '--trace <file>',
      'replay a trace instead of --workload: request i sent at its recorded arrival, prompts synthesised per block hash id (docs/motor-bench.md#trace-replay)',
    )
    .addOption(
      new Option('--trace-format <format>', 'format of --trace').choices(['mooncake']).default('mooncake'),
    )
    .option(
      '--time-scale <x>',
      'multiplies the gaps between trace arrivals, as motor sim --time-scale multiplies its delays: 0.1 = ten times faster, 0 = all at once',
      numberArg('--time-scale'),
      1,
    )
    .option(
      '--reference-instances <n>',
      'with --trace: also replay it offline on a fleet of N prefill instances: infinite cache, pooled LRU and earliest-finish hit rates',
      intArg('--reference-instances', 1),
    )
    .option(
      '--reference-capacity <tokens>',
      "the references' prefix-cache capacity per instance, tokens (default: motor sim's 6144 blocks × 16)",
      intArg('--reference-capacity', MOONCAKE_BLOCK_TOKENS),
      98_304,
    )
    .option(
      '--reference-prefill-ms <ms>',
      "the earliest-finish reference's fixed cost per prefill, ms (default: motor sim's)",
      numberArg('--reference-prefill-ms'),
      10,
    )
    .option(
      '--reference-ms-per-token <ms>',
      "the earliest-finish reference's cost per uncached prompt token, ms (default: motor sim's)",
      numberArg('--reference-ms-per-token'),
      0.1,
    )
    .action(async (flags: BenchFlags, cmd: Command) => {
      try {
        process.exitCode = await runBench(flags);
      } catch (err) {
        // Flag combinations checked after parsing: report like commander's own usage errors.
        if (err instanceof InvalidArgumentError) cmd.error(`error: ${err.message}`);
        throw err;
      }
    });
}

/** `--trace`: the replayed workload, its arrivals and (with --reference-instances) the offline references. */
async function traceSetup(
  flags: BenchFlags,
): Promise<{ workload: Workload; load: LoadShape; references: CacheReferences | null }> {
  for (const [flag, set] of [
    ['--concurrency', flags.concurrency],
    ['--rate', flags.rate],
    ['--warmup', flags.warmup],
    ['--prompt-tokens', flags.promptTokens],
    ['--conversations', flags.conversations],
    ['--turns', flags.turns],
  ] as const)
    if (set !== undefined)
      throw new InvalidArgumentError(`--trace replays the trace's own load: drop ${flag}`);
  let text: string;
  try {
    text = await readFile(flags.trace!, 'utf8');
  } catch (err) {
    throw new InvalidArgumentError(`cannot read --trace ${flags.trace}: ${(err as Error).message}`);
  }
  let records: TraceRecord[];
  try {
    records = parseMooncakeTrace(text);
  } catch (err) {
    throw new InvalidArgumentError(`${flags.trace}: ${(err as Error).message}`);
  }
  if (flags.requests !== undefined) records = records.slice(0, flags.requests);
  const references =
    flags.referenceInstances === undefined
      ? null
      : cacheReferences(records, {
          instances: flags.referenceInstances,
          capacityBlocks: Math.floor(flags.referenceCapacity / MOONCAKE_BLOCK_TOKENS),
          prefillOverheadMs: flags.referencePrefillMs,
          prefillMsPerToken: flags.referenceMsPerToken,
          timeScale: flags.timeScale,
        });
  return {
    workload: createTraceWorkload(records, { seed: flags.seed, maxTokensCap: flags.maxTokens ?? 1024 }),
    load: { kind: 'trace', arrivalsMs: traceArrivals(records, flags.timeScale) },
    references,
  };
}

function loadLabel(load: LoadShape, timeScale: number): string {
  if (load.kind === 'closed') return `concurrency ${load.concurrency}`;
  if (load.kind === 'open') return `${load.rate} req/s Poisson`;
  return `trace arrivals, gaps ×${timeScale}`;
}

async function runBench(flags: BenchFlags): Promise<number> {
  const targets = parseTargets(flags.url, flags.compare);
  if (targets.length === 0)
    throw new InvalidArgumentError('give a target: --url <base url> or --compare name=url,…');
  if (flags.concurrency !== undefined && flags.rate !== undefined)
    throw new InvalidArgumentError('--concurrency (closed loop) and --rate (open loop) are exclusive');
  if (flags.trace === undefined && flags.referenceInstances !== undefined)
    throw new InvalidArgumentError('--reference-instances needs --trace');
  const traced = flags.trace !== undefined ? await traceSetup(flags) : null;
  const load: LoadShape =
    traced?.load ??
    (flags.rate !== undefined
      ? { kind: 'open', rate: flags.rate }
      : { kind: 'closed', concurrency: flags.concurrency ?? 8 });
  const stop: StopCondition = {};
  if (flags.requests !== undefined) stop.requests = flags.requests;
  // A trace runs to its last record (the progress bar counts them) unless --duration ends it first.
  if (traced) stop.requests = traced.workload.settings.traceRecords;
  if (flags.duration !== undefined) stop.durationMs = flags.duration;
  if (!traced && stop.requests === undefined && stop.durationMs === undefined) stop.durationMs = 30_000;
  const workload =
    traced?.workload ??
    createWorkload(flags.workload, {
      seed: flags.seed,
      maxTokens: flags.maxTokens,
      promptTokens: flags.promptTokens,
      conversations: flags.conversations,
      turns: flags.turns,
    });
  const references = traced?.references ?? null;
  const apiKey = flags.apiKey ?? process.env.OPENAI_API_KEY;
  const startedAt = new Date();
  const environment = environmentFacts(pkgVersion());
  const results: TargetResult[] = [];
  const log = (line: string): void => {
    if (flags.progress) process.stderr.write(`${line}\n`);
  };
  log(
    `motor bench: ${workload.name}, ${loadLabel(load, flags.timeScale)}, ` +
      `${[stop.requests ? `${stop.requests} requests` : '', stop.durationMs ? `${stop.durationMs / 1000} s` : ''].filter(Boolean).join(' or ')}, ` +
      `${flags.stream ? 'stream' : 'no stream'}, seed ${flags.seed}; targets run one after another`,
  );
  // Loaded only when a run starts (it pulls in the HTTP client), not for every motor command.
  const { BenchRun, discoverModel } = await import('../loadgen/runner.js');
  for (const target of targets) {
    let model = flags.model;
    if (model === undefined) {
      try {
        model = await discoverModel(target.url, apiKey);
      } catch (err) {
        process.stderr.write(`motor bench: ${target.name}: ${(err as Error).message}; pass --model\n`);
        return EXIT_UNAVAILABLE;
      }
    }
    const run = new BenchRun({
      target,
      model,
      apiKey,
      workload,
      load,
      stop,
      warmup: flags.warmup,
      stream: flags.stream,
      seed: flags.seed,
      timeoutMs: flags.timeout,
      ignoreEos: flags.ignoreEos,
    });
    const progress = flags.progress ? startProgress(() => run.progress()) : null;
    const result = await run.run().finally(() => progress?.stop());
    log(
      `${target.name}: ${result.ok} ok, ${result.failed} errors in ${result.durationS.toFixed(1)} s ` +
        `(${result.requestsPerS.toFixed(2)} req/s, TTFT p50 ${result.ttftMs.p50.toFixed(1)} ms)`,
    );
    results.push(result);
  }
  if (references)
    for (const r of results)
      r.referenceHitRates = {
        infinite: references.infinite.hitRate,
        pooledLru: references.pooledLru.hitRate,
        earliestFinish: references.earliestFinish.hitRate,
      };
  process.stdout.write(formatSummary(results));
  const settings = {
    workload: workload.name,
    ...workload.settings,
    // a trace's load is its file, not the list of its arrivals
    load: traced
      ? { kind: 'trace', file: flags.trace, format: flags.traceFormat, timeScale: flags.timeScale }
      : load,
    ...(references && {
      references: {
        instances: flags.referenceInstances,
        capacityTokens: flags.referenceCapacity,
        prefillMs: flags.referencePrefillMs,
        msPerToken: flags.referenceMsPerToken,
        ...references,
      },
    }),
    stop,
    warmup: flags.warmup ?? null,
    stream: flags.stream,
    timeoutMs: flags.timeout,
    ignoreEos: flags.ignoreEos ?? false,
    model: flags.model ?? 'auto (/v1/models)',
    order: 'sequential: each target gets the full run, in the order given',
  };
  if (flags.json) {
    const report: BenchReport = {
      report: 'motor-bench',
      version: 1,
      command: commandLine(process.argv.slice(2)),
      argv: process.argv.slice(2),
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      settings,
      environment,
      targets: results,
    };
    await writeFile(flags.json, JSON.stringify(report, null, 2) + '\n');
    log(`report written to ${flags.json}`);
  }
  if (flags.svg) {
    const shape = loadLabel(load, flags.timeScale);
    const title = flags.title ?? `motor bench — ${workload.name}`;
    const subtitle = `${shape}, ${stop.requests ? `${stop.requests} requests` : `${(stop.durationMs ?? 0) / 1000} s`}, max_tokens ${workload.settings.maxTokens}, ${flags.stream ? 'stream' : 'no stream'}, seed ${flags.seed}; ${environment.cpuCount} CPUs, Node ${process.version}`;
    await writeFile(flags.svg, renderSvg(results, title, subtitle));
    log(`chart written to ${flags.svg}`);
  }
  return results.some((r) => r.ok === 0) ? 1 : 0;
}
