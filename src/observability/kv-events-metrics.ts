import { Counter, Gauge, type Registry } from 'prom-client';
import type { KvEventsHealth } from '../kv-events/kv-events-hub.js';
import type { KvEventsObserver, KvResyncReason } from '../kv-events/kv-events-observer.js';

/**
 * Health of the KV block index (issue 17) as Prometheus metrics, on the coordinator's registry.
 * Events per second: `rate(motor_kv_events_total[1m])`. Labels: instance ids (bounded by the fleet)
 * and fixed enums only.
 */
export class KvEventsMetrics implements KvEventsObserver {
  readonly events: Counter<'instance' | 'kind'>;
  readonly gaps: Counter<'instance'>;
  readonly missedBatches: Counter<'instance'>;
  readonly replays: Counter<'instance' | 'outcome'>;
  readonly resyncs: Counter<'instance' | 'reason'>;
  readonly lag: Gauge<'instance'>;

  /** `health` is read at scrape time (the hub's `health()`). */
  constructor(registry: Registry, health: () => KvEventsHealth) {
    const registers = [registry];
    this.events = new Counter({
      name: 'motor_kv_events_total',
      help: 'KV cache events applied to the block index, by instance and kind (stored, removed, cleared)',
      labelNames: ['instance', 'kind'],
      registers,
    });
    this.gaps = new Counter({
      name: 'motor_kv_event_gaps_total',
      help: 'sequence gaps seen in an instance KV event stream',
      labelNames: ['instance'],
      registers,
    });
    this.missedBatches = new Counter({
      name: 'motor_kv_event_missed_batches_total',
      help: 'KV event batches missed in gaps (before any replay)',
      labelNames: ['instance'],
      registers,
    });
    this.replays = new Counter({
      name: 'motor_kv_event_replays_total',
      help: 'replay requests to an instance replay endpoint, by outcome (ok, incomplete, failed)',
      labelNames: ['instance', 'outcome'],
      registers,
    });
    this.resyncs = new Counter({
      name: 'motor_kv_event_resyncs_total',
      help: "times an instance's indexed blocks were dropped, by reason (gap, restart, bad_batch)",
      labelNames: ['instance', 'reason'],
      registers,
    });
    this.lag = new Gauge({
      name: 'motor_kv_event_lag_seconds',
      help: "arrival time of an instance's last KV event batch minus the engine's timestamp (clock skew included)",
      labelNames: ['instance'],
      registers,
    });
    new Gauge({
      name: 'motor_kv_index_blocks',
      help: 'blocks an instance holds according to the KV block index',
      labelNames: ['instance'],
      registers,
      collect() {
        this.reset();
        for (const i of health().instances) this.set({ instance: i.instance }, i.blocks);
      },
    });
    new Gauge({
      name: 'motor_kv_index_distinct_blocks',
      help: 'distinct blocks in the KV block index (bounded by kvEvents.maxIndexedBlocks)',
      registers,
      collect() {
        this.set(health().indexedBlocks);
      },
    });
    new Gauge({
      name: 'motor_kv_index_forgotten_blocks',
      help: 'blocks the KV block index forgot to stay under kvEvents.maxIndexedBlocks (since start)',
      registers,
      collect() {
        this.set(health().forgottenBlocks);
      },
    });
  }

  batch(instance: string, events: { stored: number; removed: number; cleared: number }, lagMs: number): void {
    for (const kind of ['stored', 'removed', 'cleared'] as const)
      if (events[kind] > 0) this.events.inc({ instance, kind }, events[kind]);
    this.lag.set({ instance }, lagMs / 1000);
  }

  gap(instance: string, missed: number): void {
    this.gaps.inc({ instance });
    this.missedBatches.inc({ instance }, missed);
  }

  replay(instance: string, outcome: 'ok' | 'incomplete' | 'failed'): void {
    this.replays.inc({ instance, outcome });
  }

  resync(instance: string, reason: KvResyncReason): void {
    this.resyncs.inc({ instance, reason });
  }
}
