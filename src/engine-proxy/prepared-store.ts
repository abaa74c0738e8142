/**
 * Trigger-flow prefills that were prepared (body cached, engine not yet called) and wait for the
 * decode engine's metaserver call. Bounded (`max`) and expiring (`ttlMs`, conformance 30); a
 * metaserver call that arrives before its prepare can wait a bounded time for it.
 */
export interface PreparedStoreOptions {
  ttlMs: number;
  max: number;
  /** Most metaserver calls waiting for a prepare at once; more are answered "not found" at once. */
  maxWaiters: number;
  now?: () => number;
}

interface Slot<T> {
  value: T;
  expiresAt: number;
}

export class PreparedStore<T> {
  private readonly slots = new Map<string, Slot<T>>();
  private readonly waiters = new Map<string, Array<(value: T) => void>>();
  private waiterCount = 0;
  private readonly now: () => number;

  constructor(
    private readonly opts: PreparedStoreOptions,
    private readonly onExpire: (id: string, value: T) => void = () => {},
  ) {
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.slots.size;
  }

  get waiting(): number {
    return this.waiterCount;
  }

  /** Stores a prepared prefill; returns its expiry, or null when the store is full. */
  put(id: string, value: T): number | null {
    this.sweep();
    const expiresAt = this.now() + this.opts.ttlMs;
    const waiting = this.waiters.get(id);
    if (waiting && waiting.length > 0) {
      // A metaserver call is already waiting: hand it over directly.
      const resolve = waiting.shift()!;
      if (waiting.length === 0) this.waiters.delete(id);
      resolve(value);
      return expiresAt;
    }
    if (!this.slots.has(id) && this.slots.size >= this.opts.max) return null;
    this.slots.delete(id);
    this.slots.set(id, { value, expiresAt });
    return expiresAt;
  }

  /** Removes and returns a prepared prefill (consumed by exactly one metaserver call). */
  take(id: string): T | undefined {
    const slot = this.slots.get(id);
    if (!slot) return undefined;
    this.slots.delete(id);
    if (slot.expiresAt <= this.now()) {
      this.onExpire(id, slot.value);
      return undefined;
    }
    return slot.value;
  }

  delete(id: string): boolean {
    return this.slots.delete(id);
  }

  /** `take`, or wait up to `timeoutMs` for `put(id)`; undefined on timeout, abort or too many waiters. */
  async takeOrWait(id: string, timeoutMs: number, signal?: AbortSignal): Promise<T | undefined> {
    const now = this.take(id);
    if (now !== undefined || timeoutMs <= 0 || this.waiterCount >= this.opts.maxWaiters) return now;
    return new Promise<T | undefined>((resolve) => {
      let settled = false;
      const settle = (value: T | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiterCount--;
        resolve(value);
      };
      const waiter = (value: T): void => settle(value);
      const drop = (): void => {
        const list = this.waiters.get(id);
        if (!list) return;
        const i = list.indexOf(waiter);
        if (i >= 0) list.splice(i, 1);
        if (list.length === 0) this.waiters.delete(id);
      };
      const onAbort = (): void => {
        drop();
        settle(undefined);
      };
      const timer = setTimeout(onAbort, timeoutMs);
      this.waiterCount++;
      const list = this.waiters.get(id);
      if (list) list.push(waiter);
      else this.waiters.set(id, [waiter]);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Expires stale entries (insertion order = expiry order, so it stops at the first live one). */
  sweep(): void {
    const now = this.now();
    for (const [id, slot] of this.slots) {
      if (slot.expiresAt > now) break;
      this.slots.delete(id);
      this.onExpire(id, slot.value);
    }
  }
}
