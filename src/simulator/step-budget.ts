import {
  AbortedError,
  decodeStepMs,
  Pacer,
  prefillStepMs,
  sleep,
  yieldToLoop,
  type TimingParams,
} from './timing.js';

/**
 * vLLM V1's per-step token budget (`SchedulerConfig` in vllm/config/scheduler.py, read at
 * vllm-project/vllm main commit 01230b40): `maxNumBatchedTokens` tokens per engine step,
 * `enableChunkedPrefill` (on by default in V1), `longPrefillTokenThreshold` (0 = off).
 */
export interface BudgetParams extends TimingParams {
  maxNumBatchedTokens: number;
  enableChunkedPrefill: boolean;
  longPrefillTokenThreshold: number;
}

/**
 * The tokens each queued prefill gets in one engine step (same order as `remaining`; 0 = none), as
 * vLLM V1's `Scheduler.schedule` (vllm/v1/core/sched/scheduler.py, read at vllm-project/vllm main
 * commit 00024d31) assigns them: running requests first — a decode takes one token, and decodes
 * come before any request still prefilling because they were admitted earlier — then prefills in
 * arrival order (FCFS), each capped by `longPrefillTokenThreshold` when set, then by what is left of
 * the budget. With chunked prefill off a prompt that does not fit in what is left waits, and so does
 * every prompt behind it (the waiting loop `break`s). Pure, for tests.
 */
export function planStep(remaining: readonly number[], decodes: number, p: BudgetParams): number[] {
  const chunks = new Array<number>(remaining.length).fill(0);
  let left = Math.max(0, p.maxNumBatchedTokens - decodes);
  const threshold = p.longPrefillTokenThreshold;
  for (let i = 0; i < remaining.length && left > 0; i++) {
    let n = remaining[i]!;
    if (threshold > 0 && threshold < n) n = threshold;
    if (!p.enableChunkedPrefill && n > left) break;
    chunks[i] = Math.min(n, left);
    left -= chunks[i]!;
  }
  return chunks;
}

/**
 * One-line error for settings vLLM refuses (`SchedulerConfig.verify_max_model_len`, same file): without chunked
 * prefill a prompt longer than the budget could never be scheduled. null = fine.
 */
export function budgetConfigError(p: BudgetParams & { maxModelLen: number }): string | null {
  if (!p.enableChunkedPrefill && p.maxNumBatchedTokens < p.maxModelLen) {
    return (
      `--max-num-batched-tokens (${p.maxNumBatchedTokens}) is smaller than --max-model-len ` +
      `(${p.maxModelLen}) with chunked prefill off: raise it, lower --max-model-len, or enable chunked prefill`
    );
  }
  return null;
}

/** How an engine step's time passes: the real clock (paced, ×time-scale), or a test's virtual one. */
export interface StepClock {
  /** A new busy period starts (the engine was idle). */
  start(): void;
  /** Resolves once a step of `ms` has passed. */
  wait(ms: number): Promise<void>;
}

/** Wall-clock steps; sub-millisecond steps are paced by a deadline so they average out (Pacer). */
export class RealStepClock implements StepClock {
  private pacer = new Pacer();
  start(): void {
    this.pacer = new Pacer();
  }
  wait(ms: number): Promise<void> {
    const ahead = this.pacer.advance(ms);
    return ahead > 0 ? sleep(ahead) : yieldToLoop();
  }
}

interface PrefillJob {
  remaining: number;
  done: () => void;
  /** Finished or aborted: dropped from the queue at the next step. */
  over: boolean;
}

/** What one engine step ran (tests). */
export interface StepRecord {
  decodes: number;
  /** Prefill tokens per job scheduled, in queue order (0 = not scheduled this step). */
  chunks: number[];
  ms: number;
}

/**
 * The engine's step loop for prefill compute: every prefill waits until the steps that the budget
 * gives it have run (`prefill`). A step's time is the decode step of the running decodes plus the
 * prefill chunk it carries (timing.ts `prefillStepMs`), and while a chunk runs every decode token
 * takes that long too (`decodeStepMs`): decodes and prefill chunks share the forward pass. Decode
 * loops stay per request (response-writer.ts); only their step time is shared, not their phase.
 * At time-scale 0 no step is simulated: prefill is instantaneous (no timers, as before).
 */
export class StepBudget {
  private queue: PrefillJob[] = [];
  private looping = false;
  /** The prefill part of the step now running (ms, scaled); 0 when no prefill runs. */
  private shareMs = 0;
  /** Steps run (each carried prefill tokens or waited for a decode step with prefills queued). */
  steps = 0;

  constructor(
    private readonly p: BudgetParams,
    /** Running decodes now (each takes one token of the budget). */
    private readonly decodes: () => number,
    private readonly clock: StepClock = new RealStepClock(),
    private readonly onStep: ((s: StepRecord) => void) | null = null,
  ) {}

  /** Requests with prefill tokens left. */
  get prefilling(): number {
    let n = 0;
    for (const j of this.queue) if (!j.over) n++;
    return n;
  }

  /** One decode step's time now (scaled): the decode step plus the prefill chunk sharing it. */
  decodeStepMs(running: number, slowFactor: number): number {
    return decodeStepMs(this.p, running, slowFactor) + this.shareMs;
  }

  /**
   * Resolves once `tokens` prefill tokens (≥ 1: vLLM always computes at least the last prompt
   * token) have been computed in the steps the budget gives them; rejects with AbortedError when
   * `signal` aborts. Synchronous at time-scale 0.
   */
  prefill(tokens: number, signal: AbortSignal): Promise<void> | void {
    if (signal.aborted) throw new AbortedError(String(signal.reason));
    if (this.p.timeScale <= 0) return;
    return new Promise((resolve, reject) => {
      const job: PrefillJob = { remaining: Math.max(1, tokens), done: () => finish(null), over: false };
      const onAbort = (): void => finish(new AbortedError(String(signal.reason ?? 'aborted')));
      const finish = (err: Error | null): void => {
        if (job.over) return;
        job.over = true;
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(job);
      if (!this.looping) void this.loop();
    });
  }

  private async loop(): Promise<void> {
    this.looping = true;
    this.clock.start();
    try {
      await null; // prefills arriving in the same turn share the first step
      for (;;) {
        this.queue = this.queue.filter((j) => !j.over);
        if (this.queue.length === 0) return;
        const decodes = Math.max(0, this.decodes());
        let chunks = planStep(
          this.queue.map((j) => j.remaining),
          decodes,
          this.p,
        );
        let tokens = chunks.reduce((a, b) => a + b, 0);
        if (tokens === 0 && decodes === 0) {
          // Nothing else runs and the head does not fit (chunked prefill off, prompt > budget,
          // refused at start-up by budgetConfigError): compute it whole rather than stall.
          chunks = chunks.map((_, i) => (i === 0 ? this.queue[0]!.remaining : 0));
          tokens = chunks[0]!;
        }
        this.shareMs = prefillStepMs(this.p, tokens);
        const ms = this.shareMs + (decodes > 0 ? decodeStepMs(this.p, decodes, 1) : 0);
        this.steps++;
        this.onStep?.({ decodes, chunks, ms });
        const jobs = this.queue.slice();
        await this.clock.wait(ms);
        for (let i = 0; i < jobs.length; i++) {
          const j = jobs[i]!;
          if (j.over || chunks[i] === 0) continue;
          j.remaining -= chunks[i]!;
          if (j.remaining <= 0) j.done();
        }
      }
    } finally {
      this.shareMs = 0;
      this.looping = false;
    }
  }
}
