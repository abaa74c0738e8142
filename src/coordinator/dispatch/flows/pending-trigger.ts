import { createHash, randomBytes } from 'node:crypto';
import type { TakeOnceStore } from '../../../common/take-once-store.js';
import type { MetaserverKvFields } from '../../../engine-adapters/index.js';
import type { MotorError } from '../../../common/motor-error.js';

/** A direct-mode trigger attempt waiting for its decode engine to call the coordinator's metaserver. */
export interface PendingTrigger {
  /** The attempt's engine request id: the metaserver body's `request_id` must name it (cross-check). */
  readonly engineRequestId: string;
  /** Runs the real prefill with the decode engine's KV fields; resolves with the metaserver reply. */
  run(fields: MetaserverKvFields): Promise<{ status: number; body: unknown }>;
  /** Fails the attempt (invalid metaserver call): stops both legs. */
  fail(err: MotorError): void;
}

/**
 * Pending trigger prefills keyed by their token's key (`triggerKey`), never by request id: the
 * root id is in every client response, the token only in the URL Motor gives the decode leg. Each
 * trigger runs once, for one caller; entries leave when their attempt ends, so the store is bounded
 * by in-flight requests.
 */
export type PendingTriggers = TakeOnceStore<PendingTrigger>;

/** 128 random bits, base64url: the path segment of `<publicUrl>/v1/metaserver/<token>`. */
const TOKEN_BYTES = 16;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{22}$/;

/** A new per-attempt metaserver token and the key its trigger is stored under. */
export function newTriggerToken(): { token: string; key: string } {
  const token = randomBytes(TOKEN_BYTES).toString('base64url');
  return { token, key: digest(token) };
}

/**
 * The store key of a presented token, or null when it cannot be one. The store is looked up by the
 * token's SHA-256, not the token: how long a lookup takes reveals nothing about the token itself
 * (the constant-time rule for secrets compared through a map).
 */
export function triggerKey(token: string | undefined): string | null {
  return token !== undefined && TOKEN_SHAPE.test(token) ? digest(token) : null;
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
