import {
  AggregatorRegistry,
  type Aggregator,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';

export type WorkerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/**
 * How one metric is combined across workers when it is not a plain sum (prom-client's default, and
 * right for request counters, histograms and in-flight gauges: each worker sees its own share).
 * State every worker holds whole — each subscribes to every instance's KV event stream and builds
 * the full block index — would read N times too high summed, so it takes the largest worker's value.
 * `motor_instance_circuit_state` stays a sum on purpose: each worker has its own breakers, and the
 * value counts the workers whose breaker for that instance is in that state (docs/coordinator.md
 * "Workers"). `motor_instance_routable` is 1 only when every worker may route to the instance.
 */
export const CLUSTER_AGGREGATORS: Readonly<Record<string, Aggregator>> = {
  motor_instance_routable: 'min',
  motor_kv_events_total: 'max',
  motor_kv_event_gaps_total: 'max',
  motor_kv_event_missed_batches_total: 'max',
  motor_kv_event_resyncs_total: 'max',
  motor_kv_event_lag_seconds: 'max',
  motor_kv_index_blocks: 'max',
  motor_kv_index_distinct_blocks: 'max',
  motor_kv_index_forgotten_blocks: 'max',
};

/** One Prometheus text for the whole cluster from each worker's `registry.getMetricsAsJSON()`. */
export async function aggregateWorkerMetrics(
  perWorker: readonly WorkerMetrics[],
): Promise<{ contentType: string; body: string }> {
  const tagged = perWorker.map((metrics) =>
    metrics.map((m) => {
      const aggregator = CLUSTER_AGGREGATORS[m.name];
      return aggregator === undefined ? m : { ...m, aggregator };
    }),
  );
  const registry = AggregatorRegistry.aggregate(tagged);
  return { contentType: registry.contentType, body: await registry.metrics() };
}
