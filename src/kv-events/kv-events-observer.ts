/** Why a subscriber dropped an instance's blocks and started over. */
export type KvResyncReason =
  | 'gap' // batches missed and no replay could fill them
  | 'restart' // the sequence went back: the engine restarted with an empty cache
  | 'bad_batch'; // a batch that does not decode (its events are lost)

/**
 * What the KV event subscribers report, for metrics (src/observability/kv-events-metrics.ts). A port:
 * the subscribers call it, and it imports nothing back.
 */
export interface KvEventsObserver {
  /** One batch applied: its events by kind, and the lag behind the engine's clock. */
  batch(instance: string, events: { stored: number; removed: number; cleared: number }, lagMs: number): void;
  /** A sequence gap seen: `missed` batches between the last one and this one. */
  gap(instance: string, missed: number): void;
  replay(instance: string, outcome: 'ok' | 'incomplete' | 'failed'): void;
  resync(instance: string, reason: KvResyncReason): void;
}

export const NO_KV_EVENTS_OBSERVER: KvEventsObserver = {
  batch() {},
  gap() {},
  replay() {},
  resync() {},
};
