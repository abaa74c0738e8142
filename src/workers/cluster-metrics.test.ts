import { Counter, Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { aggregateWorkerMetrics, type WorkerMetrics } from './cluster-metrics.js';

/** A worker's registry with the metric shapes the aggregation table treats differently. */
async function worker(v: {
  requests: number;
  inFlight: number;
  routable: number;
  blocks: number;
}): Promise<WorkerMetrics> {
  const registers = [new Registry()];
  new Counter({ name: 'motor_requests_total', help: 'h', registers }).inc(v.requests);
  new Gauge({ name: 'motor_instance_in_flight', help: 'h', labelNames: ['instance'], registers }).set(
    { instance: 'd1' },
    v.inFlight,
  );
  new Gauge({ name: 'motor_instance_routable', help: 'h', labelNames: ['instance'], registers }).set(
    { instance: 'd1' },
    v.routable,
  );
  new Gauge({ name: 'motor_kv_index_distinct_blocks', help: 'h', registers }).set(v.blocks);
  return registers[0]!.getMetricsAsJSON();
}

const value = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`${series} missing from\n${text}`);
  return Number(line.slice(series.length + 1));
};

describe('aggregateWorkerMetrics', () => {
  it.each([
    // series, how it combines, expected from workers A and B below
    ['motor_requests_total', 'sum: each worker counts its own requests', 7],
    ['motor_instance_in_flight{instance="d1"}', 'sum: each worker has its own legs open', 5],
    ['motor_instance_routable{instance="d1"}', 'min: routable only when every worker may route', 0],
    ['motor_kv_index_distinct_blocks', 'max: every worker holds the whole index', 40],
  ])('%s — %s', async (series, _how, expected) => {
    const a = await worker({ requests: 3, inFlight: 2, routable: 1, blocks: 40 });
    const b = await worker({ requests: 4, inFlight: 3, routable: 0, blocks: 39 });
    const { body, contentType } = await aggregateWorkerMetrics([a, b]);
    expect(contentType).toMatch(/^text\/plain/);
    expect(value(body, series)).toBe(expected);
  });
});
