import type { Clock } from '../common/clock.js';
import { systemClock } from '../common/clock.js';

export interface TokenBucketOptions {
  /** Sustained requests per second per key. */
  readonly ratePerSecond: number;
  /** Bucket size (default = max(1, ratePerSecond)). */
  readonly burst?: number;
  /** Keys remembered at most; the least recently used bucket is dropped beyond (default 10 000). */
  readonly maxKeys?: number;
  readonly clock?: Clock;
}

/** Result of {@link TokenBucketLimiter.take}: allowed, or how long until a token is available. */
export type TakeResult =
  { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMs: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/** Per-key token buckets refilled lazily from the clock (no timers). Memory is bounded by `maxKeys`. */
export class TokenBucketLimiter {
  private readonly ratePerMs: number;
  private readonly burst: number;
  private readonly maxKeys: number;
  private readonly clock: Clock;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: TokenBucketOptions) {
    if (!(options.ratePerSecond > 0)) throw new RangeError('ratePerSecond must be > 0');
    this.ratePerMs = options.ratePerSecond / 1000;
    this.burst = Math.max(1, options.burst ?? options.ratePerSecond);
    this.maxKeys = Math.max(1, options.maxKeys ?? 10_000);
    this.clock = options.clock ?? systemClock;
  }

  get size(): number {
    return this.buckets.size;
  }

  take(key: string, cost = 1): TakeResult {
    const now = this.clock.now();
    let bucket = this.buckets.get(key);
    if (bucket) {
      this.buckets.delete(key); // re-insert below: Map order = LRU order
      bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.updatedMs) * this.ratePerMs);
      bucket.updatedMs = now;
    } else {
      bucket = { tokens: this.burst, updatedMs: now };
      if (this.buckets.size >= this.maxKeys) this.buckets.delete(this.buckets.keys().next().value as string);
    }
    this.buckets.set(key, bucket);
    if (bucket.tokens >= cost) {
      bucket.tokens -= cost;
      return { allowed: true };
    }
    return { allowed: false, retryAfterMs: Math.ceil((cost - bucket.tokens) / this.ratePerMs) };
  }
}
