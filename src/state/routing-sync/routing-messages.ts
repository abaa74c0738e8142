/**
 * The messages replicas exchange about routing decisions (JSON text on the bus). Each operation is the
 * effect of one decision, named by an id its sender made, so applying one twice changes nothing:
 *
 * - `['i', scope, instance, hashes]`: a cache-aware scorer's routed-history index recorded a prompt's
 *   block hashes for an instance (scope: which scorer, the same on every replica of one config);
 * - `['l', loadId, instance, promptTokens, pendingPrefillTokens]`: a leg (or a decode reservation)
 *   began on an instance; `['p', loadId]` its prefill is done; `['u', loadId]` it ended;
 * - `['x', routeId, instance, keysHex]`: a precisely routed request's KV blocks are expected on an
 *   instance until its events store them; `['y', routeId]` the request failed first.
 *
 * Dynamo's router replicas exchange the same kind of lifecycle events for their active sequences
 * (ai-dynamo/dynamo lib/kv-router/src/protocols.rs, `ActiveSequenceEvent` with AddRequest /
 * MarkPrefillCompleted / Free, a request id and the sending router's id that suppresses its own echo).
 */
export type RoutingOp =
  | readonly ['i', scope: string, instance: string, hashes: readonly number[]]
  | readonly ['l', loadId: string, instance: string, promptTokens: number, pendingTokens: number]
  | readonly ['p', loadId: string]
  | readonly ['u', loadId: string]
  | readonly ['x', routeId: string, instance: string, keysHex: string]
  | readonly ['y', routeId: string];

/** A replica's own requests in flight: its open loads and expected blocks (the other replicas drop theirs of it when it goes). */
export interface OwnState {
  readonly loads: readonly (readonly [loadId: string, instance: string, tokens: number, pending: number])[];
  readonly routes: readonly (readonly [routeId: string, instance: string, keysHex: string])[];
}

/** A routed-history index entry in a state answer: scope, instance, hashes oldest → newest, head positions. */
export type IndexEntry = readonly [
  scope: string,
  instance: string,
  hashes: readonly number[],
  heads: readonly number[],
];

export type RoutingMessage =
  /** To all: operations in the order they happened; `seq` counts the sender's broadcasts (a gap = lost). */
  | {
      readonly v: 1;
      readonly t: 'b';
      readonly from: string;
      readonly seq: number;
      readonly ops: readonly RoutingOp[];
    }
  /** To all (joining, or back after an outage) or to one (after a gap): here is my state, send yours. */
  | {
      readonly v: 1;
      readonly t: 'h';
      readonly from: string;
      readonly seq: number;
      readonly wantIndex: boolean;
      readonly state: OwnState;
    }
  /** To one: the answer to `h` — the sender's own state as of its broadcast `seq`, and its index if asked. */
  | {
      readonly v: 1;
      readonly t: 's';
      readonly from: string;
      readonly seq: number;
      readonly state: OwnState;
      readonly index?: readonly IndexEntry[];
    };

const MAX_ID = 200;

const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_ID;
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isHashes = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((h) => typeof h === 'number' && Number.isSafeInteger(h));
const isPositions = (v: unknown): v is number[] => Array.isArray(v) && v.every(isCount);
const KEYS_HEX = /^(?:[0-9a-f]{16})*$/;
const isKeysHex = (v: unknown): v is string => typeof v === 'string' && KEYS_HEX.test(v);

function isOp(op: unknown): op is RoutingOp {
  if (!Array.isArray(op)) return false;
  switch (op[0]) {
    case 'i':
      return op.length === 4 && isId(op[1]) && isId(op[2]) && isHashes(op[3]);
    case 'l':
      return op.length === 5 && isId(op[1]) && isId(op[2]) && isCount(op[3]) && isCount(op[4]);
    case 'p':
    case 'u':
    case 'y':
      return op.length === 2 && isId(op[1]);
    case 'x':
      return op.length === 4 && isId(op[1]) && isId(op[2]) && isKeysHex(op[3]);
    default:
      return false;
  }
}

function isState(v: unknown): v is OwnState {
  if (typeof v !== 'object' || v === null) return false;
  const { loads, routes } = v as Record<string, unknown>;
  return (
    Array.isArray(loads) &&
    loads.every(
      (l) => Array.isArray(l) && l.length === 4 && isId(l[0]) && isId(l[1]) && isCount(l[2]) && isCount(l[3]),
    ) &&
    Array.isArray(routes) &&
    routes.every((r) => Array.isArray(r) && r.length === 3 && isId(r[0]) && isId(r[1]) && isKeysHex(r[2]))
  );
}

const isIndex = (v: unknown): v is IndexEntry[] =>
  Array.isArray(v) &&
  v.every(
    (e) =>
      Array.isArray(e) && e.length === 4 && isId(e[0]) && isId(e[1]) && isHashes(e[2]) && isPositions(e[3]),
  );

/**
 * The message in `text`, or null for anything else (another version, a malformed or oversized
 * message): the bus is shared infrastructure, so a bad message is counted and dropped, never thrown.
 */
export function parseRoutingMessage(text: string, maxBytes: number): RoutingMessage | null {
  if (text.length > maxBytes) return null;
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof m !== 'object' || m === null) return null;
  const r = m as Record<string, unknown>;
  if (r.v !== 1 || !isId(r.from) || !isCount(r.seq)) return null;
  switch (r.t) {
    case 'b':
      return Array.isArray(r.ops) && r.ops.every(isOp) ? (m as RoutingMessage) : null;
    case 'h':
      return typeof r.wantIndex === 'boolean' && isState(r.state) ? (m as RoutingMessage) : null;
    case 's':
      return isState(r.state) && (r.index === undefined || isIndex(r.index)) ? (m as RoutingMessage) : null;
    default:
      return null;
  }
}

/** KV block keys (64-bit) as one hex string, 16 digits each: compact and exact in JSON. */
export function keysToHex(keys: ArrayLike<bigint>): string {
  let s = '';
  for (let i = 0; i < keys.length; i++) s += keys[i]!.toString(16).padStart(16, '0');
  return s;
}

export function keysFromHex(hex: string): BigUint64Array {
  const out = new BigUint64Array(hex.length / 16);
  for (let i = 0; i < out.length; i++) out[i] = BigInt(`0x${hex.slice(i * 16, i * 16 + 16)}`);
  return out;
}
