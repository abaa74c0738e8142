import type { MetaserverKvFields } from './types.js';

/**
 * The body a decode engine's Mooncake layer-wise connector POSTs to the metaserver. Its shape
 * changes by release (vllm-project/vllm-ascend `mooncake_layerwise_connector.py`,
 * `MooncakeLayerwiseConnectorScheduler.update_state_after_alloc`; fixtures
 * `vllm-ascend/layerwise-v0.13|v0.14|v0.15|v0.17/metaserver-call.*`): flat or per-KV-group
 * `remote_block_ids` (a flat `[]` on a full prefix hit), sizes and `remote_cached_tokens` from
 * v0.15.0rc1, `remote_block_size` from v0.17.0rc1. Motor checks only the PRESENCE of what the
 * prefill needs to push KV and passes the body on verbatim: the prefill's connector reads the rest
 * (`remote_tp_size`, `remote_cached_tokens`, …) and is the judge of its own release's fields.
 */
const REQUIRED: ReadonlyArray<{ key: string; check: (v: unknown) => boolean; what: string }> = [
  { key: 'request_id', check: (v) => typeof v === 'string' && v.length > 0, what: 'non-empty string' },
  { key: 'remote_block_ids', check: Array.isArray, what: 'array (flat or one list per KV group)' },
  { key: 'remote_engine_id', check: isPresent, what: 'present, not null' },
  { key: 'remote_host', check: isPresent, what: 'present, not null' },
  { key: 'remote_port', check: isPresent, what: 'present, not null' },
];

function isPresent(v: unknown): boolean {
  return v !== undefined && v !== null;
}

export type MetaserverParse =
  { ok: true; value: MetaserverKvFields } | { ok: false; message: string; param: string };

/**
 * Checks a metaserver body; `value` is the same object, unchanged (every key reaches the prefill).
 * The error names the first missing or malformed required field.
 */
export function parseMetaserverKvFields(input: unknown): MetaserverParse {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, message: '(root): expected a JSON object', param: '(root)' };
  }
  const body = input as Record<string, unknown>;
  for (const { key, check, what } of REQUIRED) {
    if (!check(body[key])) return { ok: false, message: `${key}: required, ${what}`, param: key };
  }
  return { ok: true, value: body as MetaserverKvFields };
}

/** The `request_id` of a metaserver body when it has a usable one (to stop its attempt on refusal). */
export function metaserverRequestId(input: unknown): string | null {
  const id =
    typeof input === 'object' && input !== null ? (input as { request_id?: unknown }).request_id : null;
  return typeof id === 'string' && id.length > 0 ? id : null;
}
