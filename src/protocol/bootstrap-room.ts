import { createHash } from 'node:crypto';

const ROOM_MASK = (1n << 63n) - 1n;

/**
 * SGLang `bootstrap_room` for one attempt: 63 bits of SHA-256 over `pair_id:attempt_seq`, so the
 * prefill and decode sides (and any coordinator replica) agree without talking.
 *
 * `span` is how many rooms the request occupies: SGLang gives prompt i of a batch (and sample i of
 * `n`) the room `room + i` when one scalar room is sent. The room is lowered so that `room + span - 1`
 * still fits 63 bits (SGLang's Rust bootstrap registry keys rooms as i64); a single request's room
 * (span 1) is the plain hash.
 */
export function bootstrapRoomFor(pairId: string, attemptSeq: number, span = 1): bigint {
  const digest = createHash('sha256').update(`${pairId}:${attemptSeq}`).digest();
  return roomForSpan(digest.readBigUInt64BE(0) & ROOM_MASK, span);
}

/** `room`, lowered just enough that `room + span - 1` fits 63 bits. */
export function roomForSpan(room: bigint, span: number): bigint {
  const extra = BigInt(Math.max(1, Math.floor(span)) - 1);
  return room > ROOM_MASK - extra ? ROOM_MASK - extra : room;
}
