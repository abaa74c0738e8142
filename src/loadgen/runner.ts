import { Pool } from 'undici';
import { sendChatCompletion, type RequestOutcome } from './http-request.js';
import { Prng, deriveSeed } from './prng.js';
import { Samples, distribution, type Distribution } from './samples.js';
import type { Workload } from './workloads.js';

export interface Target {
  name: string;
  /** OpenAI base URL, e.g. `http://127.0.0.1:8000/v1`. */
  url: string;
}

/**
 * Closed loop (`concurrency` workers, each sends its next request when the last one ends), open loop
 * (Poisson arrivals at `rate` req/s), or a replayed trace (request i sent `arrivalsMs[i]` after the
 * phase starts; the phase ends after the last arrival at the latest).
 */
export type LoadShape =
  | { kind: 'closed'; concurrency: number }
  | { kind: 'open'; rate: number }
  | { kind: 'trace'; arrivalsMs: readonly number[] };

/** When a phase ends: after `requests` requests were sent and/or after `durationMs` (whichever first). */
export interface StopCondition {
  requests?: number;
  durationMs?: number;
}

export interface RunOptions {
  target: Target;
  model: string;
  apiKey?: string;
  workload: Workload;
  load: LoadShape;
  stop: StopCondition;
  /** Warm-up phase (results discarded) with the same load shape and a separate request stream. */
  warmup?: StopCondition;
  stream: boolean;
  seed: number;
  timeoutMs: number;
  /** Send `ignore_eos: true` (vLLM/SGLang extension) so outputs run to max_tokens. */
  ignoreEos?: boolean;
}

export interface Progress {
  phase: 'warmup' | 'measure';
  target: string;
  sent: number;
  done: number;
  errors: number;
  inFlight: number;
  elapsedMs: number;
  stop: StopCondition;
}

export interface TargetResult {
  name: string;
  url: string;
  model: string;
  requests: number;
  ok: number;
  failed: number;
  durationS: number;
  requestsPerS: number;
  outputTokensPerS: number;
  ttftMs: Distribution;
  itlMs: Distribution;
  e2eMs: Distribution;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  /** cached / prompt tokens over successful requests (NaN when no prompt tokens were reported). */
  prefixCacheHitRate: number;
  /** `--trace` with `--reference-instances`: offline hit rates over the same trace (cache-references.ts). */
  referenceHitRates?: { infinite: number; pooledLru: number; earliestFinish: number };
  errors: Record<string, number>;
  /** One example message per error kind. */
  errorExamples: Record<string, string>;
}

/** Splits an OpenAI base URL into an origin (for the pool) and the chat completions path. */
export function endpointOf(baseUrl: string): { origin: string; basePath: string } {
  const u = new URL(baseUrl);
  let basePath = u.pathname.replace(/\/+$/, '');
  if (basePath === '') basePath = '/v1';
  return { origin: u.origin, basePath };
}

function headersFor(apiKey: string | undefined): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream, application/json',
  };
  if (apiKey) h.authorization = `Bearer ${apiKey}`;
  return h;
}

/** The first model listed by `GET {base}/models`. */
export async function discoverModel(baseUrl: string, apiKey?: string): Promise<string> {
  const { origin, basePath } = endpointOf(baseUrl);
  const pool = new Pool(origin, { connections: 1 });
  try {
    const res = await pool.request({
      method: 'GET',
      path: `${basePath}/models`,
      headers: headersFor(apiKey),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200)
      throw new Error(`GET ${basePath}/models → ${res.statusCode}: ${text.slice(0, 200)}`);
    const id = (JSON.parse(text) as { data?: Array<{ id?: unknown }> }).data?.[0]?.id;
    if (typeof id !== 'string') throw new Error(`GET ${basePath}/models listed no model`);
    return id;
  } finally {
    await pool.close();
  }
}

class Accumulator {
  readonly ttft = new Samples();
  readonly itl = new Samples(16 * 1024);
  readonly e2e = new Samples();
  ok = 0;
  failed = 0;
  promptTokens = 0;
  cachedTokens = 0;
  outputTokens = 0;
  readonly errors: Record<string, number> = {};
  readonly errorExamples: Record<string, string> = {};

  add(o: RequestOutcome): void {
    if (!o.ok) {
      this.failed++;
      const kind = o.error ?? 'unknown';
      this.errors[kind] = (this.errors[kind] ?? 0) + 1;
      if (!(kind in this.errorExamples)) this.errorExamples[kind] = o.errorDetail ?? '';
      return;
    }
    this.ok++;
    this.ttft.push(o.ttftMs);
    this.e2e.push(o.e2eMs);
    this.promptTokens += o.promptTokens;
    this.cachedTokens += o.cachedTokens;
    this.outputTokens += o.outputTokens;
  }
}

/**
 * Runs the (optional) warm-up and the measured phase against one target and aggregates the
 * results. `onProgress` is polled by the caller through the returned `progress()`.
 */
export class BenchRun {
  private phase: Progress['phase'] = 'measure';
  private sent = 0;
  private acc = new Accumulator();
  private inFlight = 0;
  private phaseStart = performance.now();
  private phaseStop: StopCondition = {};

  constructor(private readonly opts: RunOptions) {}

  progress(): Progress {
    return {
      phase: this.phase,
      target: this.opts.target.name,
      sent: this.sent,
      done: this.acc.ok + this.acc.failed,
      errors: this.acc.failed,
      inFlight: this.inFlight,
      elapsedMs: performance.now() - this.phaseStart,
      stop: this.phaseStop,
    };
  }

  async run(): Promise<TargetResult> {
    const { target, load, timeoutMs } = this.opts;
    const { origin, basePath } = endpointOf(target.url);
    const pool = new Pool(origin, {
      // Closed loop: one connection per worker. Open loop: as many as needed, so requests are never
      // queued inside the client (that would hide server latency behind client queueing).
      connections: load.kind === 'closed' ? load.concurrency : null,
      pipelining: 1,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 60_000,
    });
    const path = `${basePath}/chat/completions`;
    const headers = headersFor(this.opts.apiKey);
    try {
      if (this.opts.warmup && (this.opts.warmup.requests || this.opts.warmup.durationMs)) {
        await this.phaseRun('warmup', 1, this.opts.warmup, pool, path, headers);
      }
      const { acc, wallMs } = await this.phaseRun('measure', 0, this.opts.stop, pool, path, headers);
      return this.result(acc, wallMs);
    } finally {
      await pool.destroy();
    }
  }

  private async phaseRun(
    phase: Progress['phase'],
    streamId: number,
    stop: StopCondition,
    pool: Pool,
    path: string,
    headers: Record<string, string>,
  ): Promise<{ acc: Accumulator; wallMs: number }> {
    const { workload, load, model, stream, seed } = this.opts;
    this.phase = phase;
    this.sent = 0;
    this.inFlight = 0;
    this.acc = new Accumulator();
    this.phaseStop = stop;
    const acc = this.acc;
    const itl = acc.itl;
    const onGap = (g: number): void => itl.push(g);
    const start = (this.phaseStart = performance.now());
    const deadline = stop.durationMs !== undefined ? start + stop.durationMs : Infinity;
    const maxRequests = Math.min(
      stop.requests ?? Infinity,
      load.kind === 'trace' ? load.arrivalsMs.length : Infinity,
    );
    const more = (): boolean => this.sent < maxRequests && performance.now() < deadline;

    const one = async (index: number): Promise<void> => {
      const req = workload.request(index, streamId);
      const body: Record<string, unknown> = {
        model,
        messages: req.messages,
        max_tokens: req.maxTokens,
        stream,
      };
      if (stream) body.stream_options = { include_usage: true };
      if (this.opts.ignoreEos) body.ignore_eos = true;
      this.inFlight++;
      const outcome = await sendChatCompletion({
        pool,
        path,
        headers,
        body: JSON.stringify(body),
        stream,
        onGap,
      });
      this.inFlight--;
      acc.add(outcome);
    };

    if (load.kind === 'closed') {
      const worker = async (): Promise<void> => {
        while (more()) await one(this.sent++);
      };
      await Promise.all(Array.from({ length: load.concurrency }, worker));
    } else {
      // Open loop: arrival times are a seeded Poisson process (or the trace's), independent of how
      // fast the target answers. Requests due in the same timer tick are sent together.
      const rng = new Prng(deriveSeed(seed, 0x0a11, streamId));
      const arrivals = load.kind === 'trace' ? load.arrivalsMs : null;
      const pending = new Set<Promise<void>>();
      let nextAtMs = arrivals?.[0] ?? 0;
      while (more()) {
        const wait = start + nextAtMs - performance.now();
        if (wait > 1) {
          await new Promise((r) => setTimeout(r, Math.min(wait, Math.max(0, deadline - performance.now()))));
          continue;
        }
        const p = one(this.sent++);
        pending.add(p);
        void p.then(() => pending.delete(p));
        if (arrivals !== null) nextAtMs = arrivals[this.sent] ?? Infinity;
        else if (load.kind === 'open') nextAtMs += rng.exponential(load.rate) * 1000;
      }
      await Promise.all(pending);
    }
    return { acc, wallMs: performance.now() - start };
  }

  private result(acc: Accumulator, wallMs: number): TargetResult {
    const durationS = wallMs / 1000;
    return {
      name: this.opts.target.name,
      url: this.opts.target.url,
      model: this.opts.model,
      requests: acc.ok + acc.failed,
      ok: acc.ok,
      failed: acc.failed,
      durationS,
      requestsPerS: durationS > 0 ? acc.ok / durationS : 0,
      outputTokensPerS: durationS > 0 ? acc.outputTokens / durationS : 0,
      ttftMs: distribution(acc.ttft),
      itlMs: distribution(acc.itl),
      e2eMs: distribution(acc.e2e),
      promptTokens: acc.promptTokens,
      cachedTokens: acc.cachedTokens,
      outputTokens: acc.outputTokens,
      prefixCacheHitRate: acc.promptTokens > 0 ? acc.cachedTokens / acc.promptTokens : NaN,
      errors: acc.errors,
      errorExamples: acc.errorExamples,
    };
  }
}
