import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
const ITL_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];

/** The metric names of one engine family: the load gauges Motor reads, then the request counters. */
interface MetricNames {
  running: [name: string, help: string];
  waiting: [name: string, help: string];
  kvUsage: [name: string, help: string];
  prefixHits: string;
  prefixQueries: string;
  promptTokens: string;
  generationTokens: string;
  ttft: string;
  itl: string;
  e2e: string;
}

/** vllm-project/vllm vllm/v1/metrics/loggers.py `PrometheusStatLogger.__init__` (fixture vllm/openai/metrics.prom). */
const VLLM_NAMES: MetricNames = {
  running: ['vllm:num_requests_running', 'Number of requests in model execution batches.'],
  waiting: ['vllm:num_requests_waiting', 'Number of requests waiting to be processed.'],
  kvUsage: ['vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.'],
  prefixHits: 'vllm:prefix_cache_hits_total',
  prefixQueries: 'vllm:prefix_cache_queries_total',
  promptTokens: 'vllm:prompt_tokens_total',
  generationTokens: 'vllm:generation_tokens_total',
  ttft: 'vllm:time_to_first_token_seconds',
  itl: 'vllm:inter_token_latency_seconds',
  e2e: 'vllm:e2e_request_latency_seconds',
};

/**
 * sgl-project/sglang python/sglang/srt/metrics/collector.py `SchedulerMetricsCollector` gauges
 * (fixture sglang/server/metrics.prom; `token_usage` is a 0..1 ratio) and `TokenizerMetricsCollector`
 * counters/histograms (2026 index versions). SGLang has no prefix-cache query counter; the sim keeps
 * one under a `sglang:` name so both families expose the same series set.
 */
const SGLANG_NAMES: MetricNames = {
  running: ['sglang:num_running_reqs', 'The number of running requests.'],
  waiting: ['sglang:num_queue_reqs', 'The number of requests in the waiting queue.'],
  kvUsage: ['sglang:token_usage', 'The token usage.'],
  prefixHits: 'sglang:cached_tokens_total',
  prefixQueries: 'sglang:prefix_cache_queries_total',
  promptTokens: 'sglang:prompt_tokens_total',
  generationTokens: 'sglang:generation_tokens_total',
  ttft: 'sglang:time_to_first_token_seconds',
  itl: 'sglang:inter_token_latency_seconds',
  e2e: 'sglang:e2e_request_latency_seconds',
};

/** The engine's metric names (with the `model_name` label), in a registry of their own per simulator. */
export class SimMetrics {
  readonly registry = new Registry();
  readonly running: Gauge;
  readonly waiting: Gauge;
  readonly kvUsage: Gauge;
  readonly prefixHits;
  readonly prefixQueries;
  readonly ttft;
  readonly itl;
  readonly e2e;
  readonly promptTokens;
  readonly generationTokens;

  constructor(
    model: string,
    sample: () => { running: number; waiting: number; kvUsage: number },
    engine = 'vllm',
  ) {
    const names = engine === 'sglang' ? SGLANG_NAMES : VLLM_NAMES;
    const registers = [this.registry];
    const labelNames = ['model_name'] as const;
    const onCollect = (): void => {
      const s = sample();
      this.running.set({ model_name: model }, s.running);
      this.waiting.set({ model_name: model }, s.waiting);
      this.kvUsage.set({ model_name: model }, s.kvUsage);
    };
    const [runningName, runningHelp] = names.running;
    this.running = new Gauge({
      name: runningName,
      help: runningHelp,
      labelNames,
      registers,
      collect: onCollect,
    });
    this.waiting = new Gauge({ name: names.waiting[0], help: names.waiting[1], labelNames, registers });
    this.kvUsage = new Gauge({ name: names.kvUsage[0], help: names.kvUsage[1], labelNames, registers });
    const counter = (name: string, help: string) =>
      new Counter({ name, help, labelNames, registers }).labels({ model_name: model });
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, labelNames, registers, buckets }).labels({ model_name: model });
    this.prefixHits = counter(names.prefixHits, 'Prefix cache hits, in terms of number of cached tokens.');
    this.prefixQueries = counter(
      names.prefixQueries,
      'Prefix cache queries, in terms of number of queried tokens.',
    );
    this.promptTokens = counter(names.promptTokens, 'Number of prefill tokens processed.');
    this.generationTokens = counter(names.generationTokens, 'Number of generation tokens processed.');
    this.ttft = histogram(names.ttft, 'Histogram of time to first token in seconds.', LATENCY_BUCKETS);
    this.itl = histogram(names.itl, 'Histogram of inter-token latency in seconds.', ITL_BUCKETS);
    this.e2e = histogram(names.e2e, 'Histogram of e2e request latency in seconds.', LATENCY_BUCKETS);
  }
}
