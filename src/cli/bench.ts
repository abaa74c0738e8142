import { InvalidArgumentError, Option, type Command } from 'commander';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { intArg, numberArg } from './number-arg.js';
import { commandLine, environmentFacts, type BenchReport } from '../loadgen/json-report.js';
import { startProgress } from '../loadgen/progress.js';
import type { LoadShape, StopCondition, Target, TargetResult } from '../loadgen/runner.js';
import { formatSummary } from '../loadgen/summary-table.js';
import { renderSvg } from '../loadgen/svg-chart.js';
import { WORKLOAD_NAMES, createWorkload, type WorkloadName } from '../loadgen/workloads.js';

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
      'output tokens per request (default: short-chat 64, long-prompt 16, shared-prefix 64)',
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

async function runBench(flags: BenchFlags): Promise<number> {
  const targets = parseTargets(flags.url, flags.compare);
  if (targets.length === 0)
    throw new InvalidArgumentError('give a target: --url <base url> or --compare name=url,…');
  if (flags.concurrency !== undefined && flags.rate !== undefined)
    throw new InvalidArgumentError('--concurrency (closed loop) and --rate (open loop) are exclusive');
  const load: LoadShape =
    flags.rate !== undefined
      ? { kind: 'open', rate: flags.rate }
      : { kind: 'closed', concurrency: flags.concurrency ?? 8 };
  const stop: StopCondition = {};
  if (flags.requests !== undefined) stop.requests = flags.requests;
  if (flags.duration !== undefined) stop.durationMs = flags.duration;
  if (stop.requests === undefined && stop.durationMs === undefined) stop.durationMs = 30_000;
  const workload = createWorkload(flags.workload, {
    seed: flags.seed,
    maxTokens: flags.maxTokens,
    promptTokens: flags.promptTokens,
    conversations: flags.conversations,
    turns: flags.turns,
  });
  const apiKey = flags.apiKey ?? process.env.OPENAI_API_KEY;
  const startedAt = new Date();
  const environment = environmentFacts(pkgVersion());
  const results: TargetResult[] = [];
  const log = (line: string): void => {
    if (flags.progress) process.stderr.write(`${line}\n`);
  };
  log(
    `motor bench: ${workload.name}, ${load.kind === 'closed' ? `concurrency ${load.concurrency}` : `${load.rate} req/s Poisson`}, ` +
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
        return 2;
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
  process.stdout.write(formatSummary(results));
  const settings = {
    workload: workload.name,
    ...workload.settings,
    load,
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
    const shape = load.kind === 'closed' ? `concurrency ${load.concurrency}` : `${load.rate} req/s`;
    const title = flags.title ?? `motor bench — ${workload.name}`;
    const subtitle = `${shape}, ${stop.requests ? `${stop.requests} requests` : `${(stop.durationMs ?? 0) / 1000} s`}, max_tokens ${workload.settings.maxTokens}, ${flags.stream ? 'stream' : 'no stream'}, seed ${flags.seed}; ${environment.cpuCount} CPUs, Node ${process.version}`;
    await writeFile(flags.svg, renderSvg(results, title, subtitle));
    log(`chart written to ${flags.svg}`);
  }
  return results.some((r) => r.ok === 0) ? 1 : 0;
}
