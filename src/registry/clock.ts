/**
 * Time source and one-shot timers, injectable so health probing and lease expiry can be unit-tested
 * without sleeping. `realTimers` is the default everywhere; `ManualTimers` drives tests.
 */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** Opaque handle returned by `Timers.setTimeout`. */
export type TimerHandle = object;

export const realTimers: Timers = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const handle = setTimeout(fn, ms);
    // Background timers (probes, lease expiry) must never keep a process alive.
    handle.unref();
    return handle;
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

interface ManualTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/** Deterministic timers for tests: time moves only through `advance()`. */
export class ManualTimers implements Timers {
  private current: number;
  private seq = 0;
  private readonly pending = new Map<object, ManualTimer>();

  constructor(startMs = 1_000_000) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const handle = {};
    this.pending.set(handle, { at: this.current + Math.max(0, ms), seq: this.seq++, fn });
    return handle;
  }

  clearTimeout(handle: TimerHandle): void {
    this.pending.delete(handle);
  }

  /** Number of timers not yet fired. */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Moves time forward by `ms`, firing due timers in order. Between timers it yields to the
   * microtask queue so promise chains started by a timer (e.g. a probe) settle before the next fires.
   */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushMicrotasks();
      let next: [object, ManualTimer] | undefined;
      for (const entry of this.pending) {
        if (entry[1].at > target) continue;
        if (!next || entry[1].at < next[1].at || (entry[1].at === next[1].at && entry[1].seq < next[1].seq)) {
          next = entry;
        }
      }
      if (!next) break;
      this.pending.delete(next[0]);
      this.current = Math.max(this.current, next[1].at);
      next[1].fn();
    }
    this.current = target;
    await flushMicrotasks();
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}
