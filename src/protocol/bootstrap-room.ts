import { createHash } from 'node:crypto';

const ROOM_MASK = (1n << 63n) - 1n;

/**
 * SGLang `bootstrap_room` for one attempt: 63 bits of SHA-256 over `pair_id:attempt_seq`, so the
 * prefill and decode sides (and any coordinator replica) agree without talking.
 */
export function bootstrapRoomFor(pairId: string, attemptSeq: number): bigint {
  const digest = createHash('sha256').update(`${pairId}:${attemptSeq}`).digest();
  return digest.readBigUInt64BE(0) & ROOM_MASK;
}
