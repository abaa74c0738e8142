import type { Logger } from '../../common/logger.js';
import type { EngineMetricsSnapshot, EngineMetricsStore } from '../../scheduling/index.js';
import type { Instance, InstanceSource } from './instance-source.js';
import type { Upstreams } from './upstream.js';

type LoadSignal = 'running' | 'waiting' | 'kv' | 'kvLegacy';

/**
 * Engine series → Motor's load signals. Queues are summed over label sets (one per model / DP rank),
 * KV usage is maxed. vLLM: vllm-project/vllm vllm/v1/metrics/loggers.py `PrometheusStatLogger`
 * (2026 index versions; `gpu_cache_usage_perc` is the older alias). SGLang: sgl-project/sglang
 * python/sglang/srt/metrics/collector.py `SchedulerMetricsCollector` (2026 index versions;
 * `token_usage` is a 0..1 ratio like vLLM's). test/fixtures/engines/README.md fact 20.
 */
export const ENGINE_LOAD_SERIES: Readonly<Record<string, LoadSignal>> = {
  'vllm:num_requests_running': 'running',
  'vllm:num_requests_waiting': 'waiting',
  'vllm:kv_cache_usage_perc': 'kv',
  'vllm:gpu_cache_usage_perc': 'kvLegacy',
  'sglang:num_running_reqs': 'running',
  'sglang:num_queue_reqs': 'waiting',
  'sglang:token_usage': 'kv',
};

/**
 * Reads the load series the scheduler uses ({@link ENGINE_LOAD_SERIES}) from a Prometheus text
 * exposition. Null when no such series is present.
 */
export function parseEngineMetrics(text: string, scrapedAtMs: number): EngineMetricsSnapshot | null {
  const sum = { running: 0, waiting: 0, kv: -1, kvLegacy: -1 };
  let seen = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:') && !line.startsWith('sglang:')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const name = line.slice(0, brace >= 0 && brace < space ? brace : line.indexOf(' '));
    const signal = ENGINE_LOAD_SERIES[name];
    if (signal === undefined) continue;
    const value = Number(line.slice(space + 1));
    if (!Number.isFinite(value)) continue;
    if (signal === 'running' || signal === 'waiting') sum[signal] += value;
    else sum[signal] = Math.max(sum[signal], value);
    seen = true;
  }
  if (!seen) return null;
  const usage = sum.kv >= 0 ? sum.kv : sum.kvLegacy >= 0 ? sum.kvLegacy : 0;
  return {
    num_requests_running: sum.running,
    num_requests_waiting: sum.waiting,
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
 * engine proxy's `GET /v1/motor/engine-metrics` (its own `/metrics` has no engine series). A failed
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
        this.warnOnce(instance, 'no vllm:* or sglang:* load series in the engine metrics');
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
