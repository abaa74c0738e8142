import { systemClock, type Clock, type TimerHandle } from './clock.js';

/**
 * Entries keyed by id, each taken at most once, that a taker may wait for: one party puts (a prepared
 * trigger prefill, a pending trigger attempt), another takes it (the decode engine's metaserver call),
 * possibly before the put. Optional expiry and bounds keep it safe when nobody ever takes.
 */
export interface TakeOnceStoreOptions<T> {
  /** An entry not taken within this long expires and `onExpire` is told. Default: never expires. */
  ttlMs?: number;
  /** Most entries held at once: `put` refuses a new id beyond it. Default: unbounded. */
  maxEntries?: number;
  /** Most takers waiting at once: `takeOrWait` beyond it answers `undefined` at once. Default: unbounded. */
  maxWaiters?: number;
  /** Told about every entry that expired unconsumed (in `take`, `put` or `sweep`). */
  onExpire?: (id: string, value: T) => void;
  clock?: Clock;
}

interface Slot<T> {
  value: T;
  expiresAt: number;
}

interface Waiter<T> {
  /** Every id this taker accepts (the first one put serves it). */
  readonly ids: readonly string[];
  readonly resolve: (value: T | undefined) => void;
  readonly signal: AbortSignal | undefined;
  readonly giveUp: () => void;
  timer: TimerHandle | undefined;
}

export class TakeOnceStore<T> {
  private readonly slots = new Map<string, Slot<T>>();
  private readonly waiters = new Map<string, Waiter<T>[]>();
  private waiterCount = 0;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly maxWaiters: number;
  private readonly onExpire: (id: string, value: T) => void;
  private readonly clock: Clock;

  constructor(options: TakeOnceStoreOptions<T> = {}) {
    this.ttlMs = options.ttlMs ?? Infinity;
    this.maxEntries = options.maxEntries ?? Infinity;
    this.maxWaiters = options.maxWaiters ?? Infinity;
    this.onExpire = options.onExpire ?? (() => {});
    this.clock = options.clock ?? systemClock;
  }

  /** Entries held (not counting ones handed straight to a waiter). */
  get size(): number {
    return this.slots.size;
  }

  /** Takers currently waiting. */
  get waiting(): number {
    return this.waiterCount;
  }

  /**
   * Stores `value` under `id` (replacing and re-dating an entry with the same id), or hands it
   * straight to the longest-waiting taker of `id`. Returns its expiry time (`Infinity` without a TTL),
   * or null when the store is full.
   */
  put(id: string, value: T): number | null {
    this.sweep();
    const expiresAt = this.clock.now() + this.ttlMs;
    const waiting = this.waiters.get(id);
    if (waiting !== undefined) {
      this.settle(waiting[0]!, value);
      return expiresAt;
    }
    if (!this.slots.has(id) && this.slots.size >= this.maxEntries) return null;
    this.slots.delete(id); // re-insert at the end: insertion order stays expiry order
    this.slots.set(id, { value, expiresAt });
    return expiresAt;
  }

  /** Removes and returns the entry; undefined when absent or expired (an expired one is reported). */
  take(id: string): T | undefined {
    const slot = this.slots.get(id);
    if (slot === undefined) return undefined;
    this.slots.delete(id);
    if (slot.expiresAt <= this.clock.now()) {
      this.onExpire(id, slot.value);
      return undefined;
    }
    return slot.value;
  }

  /** The live entry without taking it. */
  peek(id: string): T | undefined {
    const slot = this.slots.get(id);
    return slot !== undefined && slot.expiresAt > this.clock.now() ? slot.value : undefined;
  }

  /** Drops the entry without reporting it; true when there was one. */
  delete(id: string): boolean {
    return this.slots.delete(id);
  }

  /**
   * `take`, or wait up to `timeoutMs` for a `put(id)`. Undefined on timeout, on abort, with
   * `timeoutMs <= 0`, or at once when `maxWaiters` takers already wait. One put serves one taker.
   * With several ids (candidate spellings of one key), the first held one in order is taken, else
   * the first one put serves the taker.
   */
  takeOrWait(
    id: string | readonly string[],
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<T | undefined> {
    const ids = typeof id === 'string' ? [id] : id;
    let now: T | undefined;
    for (const candidate of ids) if ((now = this.take(candidate)) !== undefined) break;
    if (now !== undefined || timeoutMs <= 0 || this.waiterCount >= this.maxWaiters || signal?.aborted) {
      return Promise.resolve(now);
    }
    return new Promise<T | undefined>((resolve) => {
      const waiter: Waiter<T> = {
        ids,
        resolve,
        signal,
        giveUp: () => this.settle(waiter, undefined),
        timer: undefined,
      };
      waiter.timer = this.clock.setTimeout(waiter.giveUp, timeoutMs);
      signal?.addEventListener('abort', waiter.giveUp, { once: true });
      for (const candidate of ids) {
        const list = this.waiters.get(candidate);
        if (list) list.push(waiter);
        else this.waiters.set(candidate, [waiter]);
      }
      this.waiterCount++;
    });
  }

  /** Expires stale entries (insertion order is expiry order, so it stops at the first live one). */
  sweep(): void {
    if (this.slots.size === 0) return;
    const now = this.clock.now();
    for (const [id, slot] of this.slots) {
      if (slot.expiresAt > now) break;
      this.slots.delete(id);
      this.onExpire(id, slot.value);
    }
  }

  private settle(waiter: Waiter<T>, value: T | undefined): void {
    let found = false;
    for (const id of waiter.ids) {
      const list = this.waiters.get(id);
      const i = list?.indexOf(waiter) ?? -1;
      if (i < 0) continue;
      found = true;
      list!.splice(i, 1);
      if (list!.length === 0) this.waiters.delete(id);
    }
    if (!found) return; // already settled
    this.waiterCount--;
    if (waiter.timer !== undefined) this.clock.clearTimeout(waiter.timer);
    waiter.signal?.removeEventListener('abort', waiter.giveUp);
    waiter.resolve(value);
  }
}
