import type { TakeOnceStore } from '../../common/take-once-store.js';
import type { MetaserverKvFields } from '../../engine-adapters/index.js';
import type { MotorError } from '../../common/motor-error.js';

/** A direct-mode trigger attempt waiting for its decode engine to call the coordinator's metaserver. */
export interface PendingTrigger {
  /** Runs the real prefill with the decode engine's KV fields; resolves with the metaserver reply. */
  run(fields: MetaserverKvFields): Promise<{ status: number; body: unknown }>;
  /** Fails the attempt (invalid metaserver call): stops both legs. */
  fail(err: MotorError): void;
}

/**
 * Pending trigger prefills keyed by engine request id. A metaserver call for an id not put yet waits
 * a bounded time (the decode may be faster than the coordinator's bookkeeping), then 404; each
 * trigger runs once, for one caller. Entries leave when their attempt ends, so the store is bounded
 * by in-flight requests.
 */
export type PendingTriggers = TakeOnceStore<PendingTrigger>;
