import type { Clock } from '../common/clock.js';
import { systemClock } from '../common/clock.js';

/** One scrape of an engine's `/metrics`, in vLLM's names (SGLang's series map onto them: ENGINE_LOAD_SERIES). */
export interface EngineMetricsSnapshot {
  readonly num_requests_running: number;
  readonly num_requests_waiting: number;
  /** KV-cache usage in [0, 1]. */
  readonly kv_cache_usage_perc: number;
  readonly scraped_at_ms: number;
}

export interface EngineMetricsStoreOptions {
  /** A snapshot older than this is ignored (default 5000 ms). */
  readonly staleAfterMs?: number;
  readonly clock?: Clock;
  /** Called the first time an instance's metrics are missing or stale (log once; the counter keeps counting). */
  readonly onFirstFallback?: (instanceId: string, why: 'missing' | 'stale') => void;
}

/**
 * Latest engine metrics per instance, fed by the scraper. Readers get `undefined` for missing or stale
 * data and every such read is counted as a fallback (exported as a metric by the coordinator).
 */
export class EngineMetricsStore {
  readonly staleAfterMs: number;
  private readonly clock: Clock;
  private readonly snapshots = new Map<string, EngineMetricsSnapshot>();
  private readonly warned = new Set<string>();
  private readonly onFirstFallback: EngineMetricsStoreOptions['onFirstFallback'];
  /** Reads that found no fresh snapshot. */
  fallbacks = { missing: 0, stale: 0 };

  constructor(options: EngineMetricsStoreOptions = {}) {
    this.staleAfterMs = options.staleAfterMs ?? 5000;
    this.clock = options.clock ?? systemClock;
    this.onFirstFallback = options.onFirstFallback;
  }

  update(instanceId: string, snapshot: EngineMetricsSnapshot): void {
    const previous = this.snapshots.get(instanceId);
    if (previous && previous.scraped_at_ms > snapshot.scraped_at_ms) return; // out-of-order scrape
    this.snapshots.set(instanceId, snapshot);
    this.warned.delete(instanceId);
  }

  forget(instanceId: string): void {
    this.snapshots.delete(instanceId);
    this.warned.delete(instanceId);
  }

  /** The fresh snapshot, or `undefined` (counted as a fallback) when missing or stale. */
  fresh(instanceId: string, nowMs = this.clock.now()): EngineMetricsSnapshot | undefined {
    const snapshot = this.snapshots.get(instanceId);
    const why = !snapshot
      ? 'missing'
      : nowMs - snapshot.scraped_at_ms > this.staleAfterMs
        ? 'stale'
        : undefined;
    if (!why) return snapshot;
    this.fallbacks[why] += 1;
    if (!this.warned.has(instanceId)) {
      this.warned.add(instanceId);
      this.onFirstFallback?.(instanceId, why);
    }
    return undefined;
  }
}
