import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { KvEventsMetrics } from './kv-events-metrics.js';

describe('KvEventsMetrics', () => {
  it('exposes events, gaps, replays, resyncs, lag and blocks per instance', async () => {
    const registry = new Registry();
    const m = new KvEventsMetrics(registry, () => ({
      instances: [
        {
          instance: 'p0',
          blocks: 42,
          lastSeq: 9n,
          lastBatchAtMs: 1,
          lagMs: 3,
          batches: 10,
          gaps: 1,
          resyncs: 0,
          error: null,
        },
      ],
      indexedBlocks: 40,
      forgottenBlocks: 2,
    }));
    m.batch('p0', { stored: 3, removed: 1, cleared: 0 }, 250);
    m.gap('p0', 4);
    m.replay('p0', 'ok');
    m.resync('p0', 'restart');
    const text = await registry.metrics();
    for (const line of [
      'motor_kv_events_total{instance="p0",kind="stored"} 3',
      'motor_kv_events_total{instance="p0",kind="removed"} 1',
      'motor_kv_event_gaps_total{instance="p0"} 1',
      'motor_kv_event_missed_batches_total{instance="p0"} 4',
      'motor_kv_event_replays_total{instance="p0",outcome="ok"} 1',
      'motor_kv_event_resyncs_total{instance="p0",reason="restart"} 1',
      'motor_kv_event_lag_seconds{instance="p0"} 0.25',
      'motor_kv_index_blocks{instance="p0"} 42',
      'motor_kv_index_distinct_blocks 40',
      'motor_kv_index_forgotten_blocks 2',
    ])
      expect(text).toContain(line);
    expect(text).not.toContain('kind="cleared"');
  });
});
