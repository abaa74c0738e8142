/**
 * Time source and one-shot timers, injected wherever behaviour depends on time (breakers, admission
 * queues, health probes, lease expiry, waiting takers) so tests drive time instead of sleeping:
 * `systemClock` in production, `ManualClock` in tests.
 */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, delayMs: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** Opaque handle returned by `Clock.setTimeout`. */
export type TimerHandle = object;

/** Wall clock backed by `Date.now` and unref'd Node timers (a pending timer never holds the process open). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(callback, delayMs) {
    const timer = setTimeout(callback, Math.max(0, delayMs));
    timer.unref();
    return timer;
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

interface ManualTimer {
  readonly dueMs: number;
  readonly seq: number;
  readonly callback: () => void;
}

/**
 * Deterministic clock for tests: time moves only through `advance` (synchronous code under test) or
 * `advanceAsync` (code whose timers start promise chains), each firing due timers in due order.
 */
export class ManualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private readonly timers = new Set<ManualTimer>();

  constructor(startMs = 1_000_000) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const timer: ManualTimer = { dueMs: this.nowMs + Math.max(0, delayMs), seq: this.seq++, callback };
    this.timers.add(timer);
    return timer;
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers.delete(handle as ManualTimer);
  }

  /** Number of timers not yet fired nor cleared (tests assert nothing leaks). */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due (including ones those schedule). */
  advance(ms: number): void {
    const target = this.nowMs + ms;
    for (let next = this.nextDue(target); next; next = this.nextDue(target)) this.fire(next);
    this.nowMs = target;
  }

  /**
   * `advance`, but promise chains settle before each due timer fires and after the last, so a timer
   * that starts async work (a probe) and schedules its successor when that work ends behaves as in
   * production.
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.nowMs + ms;
    for (;;) {
      await flushMicrotasks();
      const next = this.nextDue(target);
      if (!next) break;
      this.fire(next);
    }
    this.nowMs = target;
    await flushMicrotasks();
  }

  private nextDue(targetMs: number): ManualTimer | undefined {
    let next: ManualTimer | undefined;
    for (const t of this.timers) {
      if (t.dueMs > targetMs) continue;
      if (!next || t.dueMs < next.dueMs || (t.dueMs === next.dueMs && t.seq < next.seq)) next = t;
    }
    return next;
  }

  private fire(timer: ManualTimer): void {
    this.timers.delete(timer);
    this.nowMs = Math.max(this.nowMs, timer.dueMs);
    timer.callback();
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}
