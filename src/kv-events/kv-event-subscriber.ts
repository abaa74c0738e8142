import type { BlockIndex } from './block-index.js';
import { decodeKvEventBatch, type KvEventBatch } from './kv-event-decoder.js';
import type { KvEventMessage, KvEventTransport } from './kv-event-transport.js';
import { NO_KV_EVENTS_OBSERVER, type KvEventsObserver, type KvResyncReason } from './kv-events-observer.js';

/** A subscriber's health, for metrics, the dashboard and `motor doctor`. */
export interface KvSubscriberStatus {
  instance: string;
  /** Last applied sequence number; null until the first batch. */
  lastSeq: bigint | null;
  /** Wall-clock time the last batch arrived (ms); null until the first. */
  lastBatchAtMs: number | null;
  /** Arrival time minus the engine's batch timestamp, last batch (ms; includes clock skew). */
  lagMs: number | null;
  batches: number;
  gaps: number;
  resyncs: number;
  /** `block_size` of the last BlockStored event (the engine's block size); null until one came. */
  blockSize?: number | null;
  /** Set when the stream ended with an error (the hub restarts it). */
  error: string | null;
}

export interface KvSubscriberOptions {
  /** Bound on one replay request (wall clock). */
  replayTimeoutMs: number;
  observer?: KvEventsObserver;
  nowMs?: () => number;
}

/** Mediums that are the engine's GPU cache (vLLM's `MEDIUM_GPU`; null before mediums existed). */
const routable = (medium: string | null): boolean => medium === null || medium === 'GPU';

/**
 * Keeps one instance's blocks in the index from its KV event stream. Sequence numbers (see
 * kv-event-transport.ts) drive the bookkeeping:
 * - the first batch after connecting with seq > 0, or a jump past last + 1, is a gap: the missed
 *   batches are asked of the replay endpoint; what it cannot give (none configured, timed out, or
 *   its buffer no longer reaches back) makes the instance resync: its blocks are dropped, since
 *   missed removals would otherwise leave blocks the engine no longer holds (under-predicting is safe,
 *   over-predicting routes to a cold cache);
 * - seq ≤ last is an engine restart (replays come on their own socket, so the live stream never
 *   repeats): its cache is empty, so are its blocks here, and the new stream is followed from 0.
 * Only GPU-medium blocks are indexed (offloaded CPU/disk copies are not a prefix-cache hit).
 */
export class KvEventSubscriber {
  private readonly observer: KvEventsObserver;
  private readonly now: () => number;
  private readonly s: KvSubscriberStatus;
  private stopped = false;

  constructor(
    readonly instance: string,
    private readonly transport: KvEventTransport,
    private readonly index: BlockIndex,
    private readonly opts: KvSubscriberOptions,
  ) {
    this.observer = opts.observer ?? NO_KV_EVENTS_OBSERVER;
    this.now = opts.nowMs ?? Date.now;
    this.s = {
      instance,
      lastSeq: null,
      lastBatchAtMs: null,
      lagMs: null,
      batches: 0,
      gaps: 0,
      resyncs: 0,
      blockSize: null,
      error: null,
    };
  }

  status(): KvSubscriberStatus {
    return { ...this.s };
  }

  /** Consumes the live stream until the transport closes; errors end it (recorded in `status`). */
  async run(): Promise<void> {
    try {
      for await (const m of this.transport.live()) await this.receive(m);
    } catch (err) {
      this.s.error = (err as Error).message;
      throw err;
    }
  }

  /**
   * No message reaches the index after this (the hub has dropped the instance): one the transport
   * had already received, or a replay still in flight, would otherwise store its blocks again.
   */
  stop(): void {
    this.stopped = true;
  }

  /** One live message (exported for tests with a scripted transport). */
  async receive(m: KvEventMessage): Promise<void> {
    if (this.stopped) return;
    const last = this.s.lastSeq;
    if (last !== null && m.seq <= last) {
      // Replays arrive on their own socket, so the live stream never repeats: the engine restarted.
      this.resync('restart');
      this.s.lastSeq = null;
    }
    const expected = this.s.lastSeq === null ? 0n : this.s.lastSeq + 1n;
    if (m.seq > expected) await this.fill(expected, m.seq);
    this.apply(m);
  }

  /** Batches `from` … `to - 1` were missed: replay them, or resync. */
  private async fill(from: bigint, to: bigint): Promise<void> {
    this.s.gaps++;
    this.observer.gap(this.instance, Number(to - from));
    if (!this.transport.canReplay) return this.resync('gap');
    let got: KvEventMessage[];
    try {
      got = await this.transport.replay(from, this.opts.replayTimeoutMs);
    } catch {
      this.observer.replay(this.instance, 'failed');
      return this.resync('gap');
    }
    const first = got.find((m) => m.seq >= from);
    if (first === undefined || first.seq !== from) {
      // The buffer no longer reaches back: what came before is unknown.
      this.observer.replay(this.instance, 'incomplete');
      this.resync('gap');
    } else this.observer.replay(this.instance, 'ok');
    for (const m of got) if (m.seq >= from && m.seq < to && (this.s.lastSeq ?? -1n) < m.seq) this.apply(m);
  }

  private apply(m: KvEventMessage): void {
    if (this.stopped) return;
    this.s.lastSeq = m.seq;
    let batch: KvEventBatch;
    try {
      batch = decodeKvEventBatch(m.payload);
    } catch {
      return this.resync('bad_batch');
    }
    const counts = { stored: 0, removed: 0, cleared: 0 };
    for (const e of batch.events) {
      if (e.kind === 'cleared') {
        counts.cleared++;
        this.index.clearInstance(this.instance);
      } else if (!routable(e.medium)) continue;
      else if (e.kind === 'stored') {
        counts.stored++;
        this.s.blockSize = e.blockSize;
        this.index.store(this.instance, e.hashes);
      } else {
        counts.removed++;
        this.index.remove(this.instance, e.hashes);
      }
    }
    const now = this.now();
    this.s.batches++;
    this.s.lastBatchAtMs = now;
    this.s.lagMs = now - batch.ts * 1000;
    this.observer.batch(this.instance, counts, this.s.lagMs);
  }

  private resync(reason: KvResyncReason): void {
    this.s.resyncs++;
    this.observer.resync(this.instance, reason);
    this.index.clearInstance(this.instance);
  }
}
