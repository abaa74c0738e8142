import type { MetaserverKvFields } from '../../engine-adapters/index.js';
import type { MotorError } from '../motor-error.js';

/** A direct-mode trigger attempt waiting for its decode engine to call the coordinator's metaserver. */
export interface PendingTrigger {
  /** Runs the real prefill with the decode engine's KV fields; resolves with the metaserver reply. */
  run(fields: MetaserverKvFields): Promise<{ status: number; body: unknown }>;
  /** Fails the attempt (invalid metaserver call): stops both legs. */
  fail(err: MotorError): void;
}

/**
 * Pending trigger prefills keyed by engine request id. A metaserver call for an id not registered
 * yet waits a bounded time (the decode may be faster than the coordinator's bookkeeping), then 404.
 * Entries leave when their attempt ends, so the map is bounded by in-flight requests.
 */
export class TriggerRegistry {
  private readonly pending = new Map<string, PendingTrigger>();
  private readonly waiters = new Map<string, Array<(p: PendingTrigger | null) => void>>();

  register(engineRequestId: string, entry: PendingTrigger): void {
    this.pending.set(engineRequestId, entry);
    const ws = this.waiters.get(engineRequestId);
    if (ws) {
      this.waiters.delete(engineRequestId);
      for (const w of ws) w(entry);
    }
  }

  remove(engineRequestId: string): void {
    this.pending.delete(engineRequestId);
  }

  peek(engineRequestId: string): PendingTrigger | undefined {
    return this.pending.get(engineRequestId);
  }

  /** Takes the entry (each trigger runs once), waiting up to `waitMs` for it to appear. */
  take(engineRequestId: string, waitMs: number): Promise<PendingTrigger | null> {
    const entry = this.pending.get(engineRequestId);
    if (entry) {
      this.pending.delete(engineRequestId);
      return Promise.resolve(entry);
    }
    if (waitMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const list = this.waiters.get(engineRequestId) ?? [];
      const waiter = (p: PendingTrigger | null): void => {
        clearTimeout(timer);
        if (p) this.pending.delete(engineRequestId);
        resolve(p);
      };
      const timer = setTimeout(() => {
        const ws = this.waiters.get(engineRequestId);
        if (ws) {
          const i = ws.indexOf(waiter);
          if (i >= 0) ws.splice(i, 1);
          if (ws.length === 0) this.waiters.delete(engineRequestId);
        }
        resolve(null);
      }, waitMs);
      list.push(waiter);
      this.waiters.set(engineRequestId, list);
    });
  }
}
