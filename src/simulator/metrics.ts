import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
const ITL_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];

/** The vLLM metric names (with the `model_name` label), in a registry of their own per simulator. */
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

  constructor(model: string, sample: () => { running: number; waiting: number; kvUsage: number }) {
    const registers = [this.registry];
    const labelNames = ['model_name'] as const;
    const onCollect = (): void => {
      const s = sample();
      this.running.set({ model_name: model }, s.running);
      this.waiting.set({ model_name: model }, s.waiting);
      this.kvUsage.set({ model_name: model }, s.kvUsage);
    };
    this.running = new Gauge({
      name: 'vllm:num_requests_running',
      help: 'Number of requests in model execution batches.',
      labelNames,
      registers,
      collect: onCollect,
    });
    this.waiting = new Gauge({
      name: 'vllm:num_requests_waiting',
      help: 'Number of requests waiting to be processed.',
      labelNames,
      registers,
    });
    this.kvUsage = new Gauge({
      name: 'vllm:kv_cache_usage_perc',
      help: 'KV-cache usage. 1 means 100 percent usage.',
      labelNames,
      registers,
    });
    const counter = (name: string, help: string) =>
      new Counter({ name, help, labelNames, registers }).labels({ model_name: model });
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, labelNames, registers, buckets }).labels({ model_name: model });
    this.prefixHits = counter(
      'vllm:prefix_cache_hits_total',
      'Prefix cache hits, in terms of number of cached tokens.',
    );
    this.prefixQueries = counter(
      'vllm:prefix_cache_queries_total',
      'Prefix cache queries, in terms of number of queried tokens.',
    );
    this.promptTokens = counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.');
    this.generationTokens = counter('vllm:generation_tokens_total', 'Number of generation tokens processed.');
    this.ttft = histogram(
      'vllm:time_to_first_token_seconds',
      'Histogram of time to first token in seconds.',
      LATENCY_BUCKETS,
    );
    this.itl = histogram(
      'vllm:inter_token_latency_seconds',
      'Histogram of inter-token latency in seconds.',
      ITL_BUCKETS,
    );
    this.e2e = histogram(
      'vllm:e2e_request_latency_seconds',
      'Histogram of e2e request latency in seconds.',
      LATENCY_BUCKETS,
    );
  }
}
