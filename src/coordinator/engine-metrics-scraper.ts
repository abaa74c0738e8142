import type { Logger } from '../common/logger.js';
import type { EngineMetricsSnapshot, EngineMetricsStore } from '../scheduling/index.js';
import type { Instance, InstanceSource } from './instance-source.js';
import type { Upstreams } from './upstream.js';

/**
 * Reads the vLLM series the scheduler uses from a Prometheus text exposition. Series with several
 * label sets (one per model) are summed (queues) or maxed (KV usage). `vllm:gpu_cache_usage_perc`
 * (older vLLM) stands in for `vllm:kv_cache_usage_perc`. Null when no series is present.
 */
export function parseEngineMetrics(text: string, scrapedAtMs: number): EngineMetricsSnapshot | null {
  let running = 0;
  let waiting = 0;
  let kv = -1;
  let kvLegacy = -1;
  let seen = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const name = line.slice(0, brace >= 0 && brace < space ? brace : line.indexOf(' '));
    const value = Number(line.slice(space + 1));
    if (!Number.isFinite(value)) continue;
    if (name === 'vllm:num_requests_running') running += value;
    else if (name === 'vllm:num_requests_waiting') waiting += value;
    else if (name === 'vllm:kv_cache_usage_perc') kv = Math.max(kv, value);
    else if (name === 'vllm:gpu_cache_usage_perc') kvLegacy = Math.max(kvLegacy, value);
    else continue;
    seen = true;
  }
  if (!seen) return null;
  const usage = kv >= 0 ? kv : kvLegacy >= 0 ? kvLegacy : 0;
  return {
    num_requests_running: running,
    num_requests_waiting: waiting,
    kv_cache_usage_perc: Math.min(1, Math.max(0, usage)),
    scraped_at_ms: scrapedAtMs,
  };
}

export interface EngineMetricsScraperOptions {
  source: InstanceSource;
  upstreams: Upstreams;
  store: EngineMetricsStore;
  intervalMs: number;
  timeoutMs: number;
  log: Logger;
  now?: () => number;
}

/**
 * Scrapes the engine metrics of every known instance each `intervalMs` (one scrape per instance at a
 * time) into the scheduler's {@link EngineMetricsStore}: `GET /metrics` of a direct engine, or the
 * engine proxy's `GET /v1/motor/engine-metrics` (its own `/metrics` has no `vllm:` series). A failed
 * scrape leaves the old snapshot to go stale (the store ignores it after `staleAfterMs` and counts
 * the fallback).
 */
export class EngineMetricsScraper {
  private timer: NodeJS.Timeout | null = null;
  private readonly busy = new Set<string>();
  private readonly warned = new Set<string>();
  /** Scrapes by result (for metrics and tests). */
  readonly counts = { ok: 0, failed: 0, empty: 0 };

  constructor(private readonly opts: EngineMetricsScraperOptions) {}

  start(): void {
    if (this.timer) return;
    this.tick();
    this.timer = setInterval(() => this.tick(), this.opts.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One round over the fleet (exposed for tests). */
  tick(): Promise<void> {
    return Promise.all(this.opts.source.all().map((i) => this.scrape(i))).then(() => undefined);
  }

  private async scrape(instance: Instance): Promise<void> {
    if (this.busy.has(instance.id)) return;
    this.busy.add(instance.id);
    const now = this.opts.now ?? Date.now;
    try {
      const res = await this.opts.upstreams.request(instance, {
        method: 'GET',
        // An engine proxy serves its own metrics at /metrics and the engine's at this path.
        path: instance.mode === 'proxy' ? '/v1/motor/engine-metrics' : '/metrics',
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
      const snapshot = parseEngineMetrics(text, now());
      if (!snapshot) {
        this.counts.empty += 1;
        this.warnOnce(instance, 'no vllm:* series in the engine metrics');
        return;
      }
      this.counts.ok += 1;
      this.warned.delete(instance.id);
      this.opts.store.update(instance.id, snapshot);
    } catch (err) {
      this.counts.failed += 1;
      this.warnOnce(instance, `metrics scrape failed: ${(err as Error).message}`);
    } finally {
      this.busy.delete(instance.id);
    }
  }

  private warnOnce(instance: Instance, message: string): void {
    if (this.warned.has(instance.id)) return;
    this.warned.add(instance.id);
    this.opts.log.warn({ instance: instance.id, url: instance.url }, message);
  }
}
