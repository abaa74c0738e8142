import type { BlockKey } from '../../kv-events/kv-event-decoder.js';

interface Expectation {
  expiresAtMs: number;
  /** Routed requests still expecting this block here (a failed one releases its share). */
  refs: number;
}

/**
 * The in-flight overlay of precise routing (issue 17): blocks this coordinator routed to an instance
 * whose engine has not yet published them (the prefill is queued or running). An expectation ends when
 * the instance's KV events store the block ({@link confirm}), when the request fails or is cancelled
 * ({@link release}), or when `ttlMs` passes. Without it a conversation's next turn, arriving while the
 * previous turn still waits for its prefill, sees no holder and is routed by load alone.
 *
 * Dynamo's KV router does the like: its approximate indexer (ai-dynamo/dynamo
 * lib/llm/src/kv_router/approx.rs, `ApproxKvIndexer`) inserts a routed request's block hashes for the
 * chosen worker and removes them when a TTL passes, and its active-sequence tracker
 * (lib/llm/src/kv_router/sequence.rs over `dynamo_kv_router::sequence::ActiveSequences`) counts the
 * blocks of requests routed and not yet finished per worker, optionally shared between router replicas
 * (`replica_sync`). Here the other replicas' routes are added too when `routingSync` is on (each
 * replica publishes its expectations); without it they become visible when their events arrive.
 *
 * Memory is bounded: at most `maxBlocks` expectations over all instances; past it the oldest of the
 * instance being recorded are dropped (a request's blocks go in tail first, so its head lasts longest).
 */
export class InflightBlocks {
  private readonly byInstance = new Map<string, Map<BlockKey, Expectation>>();
  private total = 0;

  constructor(
    readonly ttlMs: number,
    readonly maxBlocks: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Expectations held (all instances). */
  get size(): number {
    return this.total;
  }

  /** A request with these prompt blocks was routed to `instance`. */
  expect(instance: string, keys: ArrayLike<BlockKey>): void {
    if (this.ttlMs <= 0 || keys.length === 0) return;
    let mine = this.byInstance.get(instance);
    if (mine === undefined) this.byInstance.set(instance, (mine = new Map()));
    const expiresAtMs = this.now() + this.ttlMs;
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const e = mine.get(key);
      if (e === undefined) {
        mine.set(key, { expiresAtMs, refs: 1 });
        this.total++;
      } else {
        mine.delete(key); // re-inserted: most recent
        e.refs++;
        e.expiresAtMs = expiresAtMs;
        mine.set(key, e);
      }
    }
    while (this.total > this.maxBlocks) {
      mine.delete(mine.keys().next().value!);
      this.total--;
    }
  }

  /** The routed request failed or was cancelled before its prefill published: drop its share. */
  release(instance: string, keys: ArrayLike<BlockKey>): void {
    const mine = this.byInstance.get(instance);
    if (mine === undefined) return;
    for (let i = 0; i < keys.length; i++) {
      const e = mine.get(keys[i]!);
      if (e !== undefined && --e.refs <= 0) this.drop(mine, keys[i]!);
    }
  }

  /** The instance's events stored these blocks: they are known now, no longer expected. */
  confirm(instance: string, keys: readonly BlockKey[]): void {
    const mine = this.byInstance.get(instance);
    if (mine === undefined || mine.size === 0) return;
    for (const key of keys) if (mine.has(key)) this.drop(mine, key);
  }

  /** Consecutive blocks of `keys` from index `from` expected on `instance` (expired ones are dropped). */
  run(instance: string, keys: ArrayLike<BlockKey>, from: number): number {
    const mine = this.byInstance.get(instance);
    if (mine === undefined || mine.size === 0) return 0;
    const now = this.now();
    let i = from;
    for (; i < keys.length; i++) {
      const e = mine.get(keys[i]!);
      if (e === undefined) break;
      if (e.expiresAtMs <= now) {
        this.drop(mine, keys[i]!);
        break;
      }
    }
    return i - from;
  }

  private drop(mine: Map<BlockKey, Expectation>, key: BlockKey): void {
    mine.delete(key);
    this.total--;
  }
}
