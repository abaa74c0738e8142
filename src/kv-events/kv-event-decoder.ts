import { decode } from '@msgpack/msgpack';

/**
 * Decoder for the KV cache events vLLM publishes (`--kv-events-config`), and SGLang in the same
 * format. Facts, from vllm-project/vllm `vllm/distributed/kv_events.py` (test/fixtures/engines/vllm/
 * kv-events/README.md has the fixtures and the releases):
 * - a batch is `EventBatch(ts: float, events: list, data_parallel_rank: int | None = None)`, a msgspec
 *   Struct; `BlockStored`, `BlockRemoved`, `AllBlocksCleared` are tagged Structs (tag = class name);
 * - until PR 42892 (2026-06) every Struct was `array_like`: a batch is `[ts, [event…], dp_rank?]` and an
 *   event `[tag, field…]` in declaration order, trailing fields at their default omitted; after it
 *   events are maps with the tag under `"type"`, and on newer main the batch is a map as well;
 * - `BlockStored` fields: block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 *   lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window (medium from
 *   PR 19737 on); `BlockRemoved`: block_hashes, medium, group_idx;
 * - a block hash is `ExternalBlockHash = bytes | int`: the 32-byte digest, or with
 *   `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES` (default on) its low 64 bits as an unsigned int
 *   (`maybe_convert_block_hash`, vllm/v1/core/kv_cache_utils.py); the first release sent Python
 *   `hash()` values, which can be negative.
 * Every form decodes to one key per block: {@link blockKey}.
 */

/** A block hash as an engine sends it (msgpack int, uint64 as bigint, or bytes). */
export type BlockHashValue = bigint | number | Uint8Array;
/** One block's name in Motor: the engine's hash as an unsigned 64-bit integer. */
export type BlockKey = bigint;

export type KvEvent =
  | {
      kind: 'stored';
      hashes: BlockKey[];
      parent: BlockKey | null;
      blockSize: number;
      tokenCount: number;
      /** `GPU`, `CPU`, … (absent before vLLM's PR 19737 and in SGLang: null). */
      medium: string | null;
    }
  | { kind: 'removed'; hashes: BlockKey[]; medium: string | null }
  | { kind: 'cleared' };

export interface KvEventBatch {
  /** The engine's wall-clock time of the batch, seconds since the epoch. */
  ts: number;
  events: KvEvent[];
  dataParallelRank: number | null;
  /** Events of a type this decoder does not know (newer engines), skipped. */
  skipped: number;
}

export class KvEventDecodeError extends Error {
  constructor(message: string) {
    super(`KV event batch: ${message}`);
    this.name = 'KvEventDecodeError';
  }
}

const U64 = 64;

/**
 * The key of a block hash: ints (negative ones too) as their two's-complement unsigned 64 bits,
 * bytes as their last 8 bytes read big-endian — the int vLLM would have sent for the same digest.
 */
export function blockKey(h: BlockHashValue): BlockKey {
  if (typeof h === 'bigint') return BigInt.asUintN(U64, h);
  if (typeof h === 'number') {
    if (!Number.isSafeInteger(h)) throw new KvEventDecodeError(`block hash ${h} is not an integer`);
    return BigInt.asUintN(U64, BigInt(h));
  }
  if (h.length < 8) throw new KvEventDecodeError(`block hash of ${h.length} bytes (expected ≥ 8)`);
  let k = 0n;
  for (let i = h.length - 8; i < h.length; i++) k = (k << 8n) | BigInt(h[i]!);
  return k;
}

function isHash(v: unknown): v is BlockHashValue {
  return typeof v === 'bigint' || typeof v === 'number' || v instanceof Uint8Array;
}

function hashes(v: unknown, what: string): BlockKey[] {
  if (!Array.isArray(v) || !v.every(isHash))
    throw new KvEventDecodeError(`${what}: expected a list of hashes`);
  return v.map(blockKey);
}

function optString(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function int(v: unknown, what: string): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  throw new KvEventDecodeError(`${what}: expected an integer`);
}

/** Field names by position after the tag, for the array layout (declaration order in kv_events.py). */
const STORED_FIELDS = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium'];
const REMOVED_FIELDS = ['block_hashes', 'medium'];

/** One event as `{type, field → value}`, from either layout; null if it is neither. */
function fields(raw: unknown): Map<string, unknown> | null {
  if (Array.isArray(raw)) {
    const [tag, ...rest] = raw as unknown[];
    const names = tag === 'BlockStored' ? STORED_FIELDS : tag === 'BlockRemoved' ? REMOVED_FIELDS : [];
    const out = new Map<string, unknown>([['type', tag]]);
    names.forEach((name, i) => {
      if (i < rest.length) out.set(name, rest[i]);
    });
    return out;
  }
  if (raw instanceof Map) return raw as Map<string, unknown>;
  if (raw !== null && typeof raw === 'object' && !(raw instanceof Uint8Array))
    return new Map(Object.entries(raw as Record<string, unknown>));
  return null;
}

function event(raw: unknown, i: number): KvEvent | null {
  const f = fields(raw);
  if (f === null) throw new KvEventDecodeError(`events[${i}]: expected an array or a map`);
  const type = f.get('type');
  if (type === 'AllBlocksCleared') return { kind: 'cleared' };
  if (type === 'BlockRemoved') {
    return {
      kind: 'removed',
      hashes: hashes(f.get('block_hashes'), `events[${i}].block_hashes`),
      medium: optString(f.get('medium')),
    };
  }
  if (type !== 'BlockStored') return null;
  const parent = f.get('parent_block_hash');
  if (parent != null && !isHash(parent))
    throw new KvEventDecodeError(`events[${i}].parent_block_hash: expected a hash`);
  const tokens = f.get('token_ids');
  if (!Array.isArray(tokens)) throw new KvEventDecodeError(`events[${i}].token_ids: expected a list`);
  return {
    kind: 'stored',
    hashes: hashes(f.get('block_hashes'), `events[${i}].block_hashes`),
    parent: parent == null ? null : blockKey(parent),
    blockSize: int(f.get('block_size'), `events[${i}].block_size`),
    tokenCount: tokens.length,
    medium: optString(f.get('medium')),
  };
}

/** Decodes one msgpack payload (the third frame of a published message). Throws a one-line error. */
export function decodeKvEventBatch(payload: Uint8Array): KvEventBatch {
  let raw: unknown;
  try {
    raw = decode(payload, { useBigInt64: true });
  } catch (err) {
    throw new KvEventDecodeError(`not msgpack (${(err as Error).message})`);
  }
  let ts: unknown;
  let list: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) [ts, list, rank] = raw as unknown[];
  else if (raw !== null && typeof raw === 'object' && !(raw instanceof Uint8Array)) {
    const m = raw as Record<string, unknown>;
    [ts, list, rank] = [m.ts, m.events, m.data_parallel_rank];
  } else throw new KvEventDecodeError('expected an array or a map');
  if (typeof ts !== 'number') throw new KvEventDecodeError('ts: expected a number');
  if (!Array.isArray(list)) throw new KvEventDecodeError('events: expected a list');
  const events: KvEvent[] = [];
  let skipped = 0;
  list.forEach((e, i) => {
    const ev = event(e, i);
    if (ev === null) skipped++;
    else events.push(ev);
  });
  const dataParallelRank = typeof rank === 'number' ? rank : null;
  return { ts, events, dataParallelRank, skipped };
}
