import { randomBytes } from 'node:crypto';
import { MotorError } from '../../common/motor-error.js';

/**
 * Loop detection (issue 15 finding 10): every leg Motor sends carries `x-motor-hops`, the ids of the
 * coordinators the request came through, this one last. A client request that already names this
 * coordinator came back to it (an instance URL pointing at the coordinator, directly or through
 * another coordinator) and is refused with 508 at once, before auth or body; so is one that went
 * through {@link MAX_HOPS} coordinators. Without it one such request recursed ~256 hops for 60 s.
 */
export const HOP_HEADER = 'x-motor-hops';

/** Coordinators a request may pass through before it is taken for a loop. */
export const MAX_HOPS = 4;

/** This process's id in the header: random, so it names nothing (one per process, shared by coordinators in it). */
export const LOCAL_HOP_ID = randomBytes(6).toString('hex');

function hopsOf(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const joined = Array.isArray(value) ? value.join(',') : value;
  return joined
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
}

/** The 508 for a request that looped back, or null. `value`: the incoming `x-motor-hops`. */
export function hopRefusal(value: string | string[] | undefined): MotorError | null {
  if (value === undefined) return null;
  const hops = hopsOf(value);
  if (hops.includes(LOCAL_HOP_ID))
    return new MotorError(
      'loop_detected',
      `request came back to the Motor coordinator that sent it (after ${hops.length} hop${hops.length === 1 ? '' : 's'}): ` +
        "an instance URL points at this coordinator's own port",
    );
  if (hops.length >= MAX_HOPS)
    return new MotorError(
      'loop_detected',
      `request already went through ${hops.length} Motor coordinators (limit ${MAX_HOPS}): instance URLs form a loop`,
    );
  return null;
}

/** The header value of a request's legs: the incoming hops, then this coordinator. */
export function nextHops(value: string | string[] | undefined): string {
  const hops = hopsOf(value);
  hops.push(LOCAL_HOP_ID);
  return hops.join(',');
}
