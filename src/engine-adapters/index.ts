/**
 * Engine adapters: the per-engine translation of the Motor protocol (docs/engines.md) into engine-native
 * requests, free of HTTP-server concerns so both the engine proxy and the coordinator's direct mode
 * can use them. See `EngineAdapter` in ./types.ts for the calling sequence.
 */
import type { EngineKind } from '../protocol/index.js';
import { sglangAdapter } from './sglang.js';
import type { EngineAdapter } from './types.js';
import { vllmAdapter } from './vllm.js';

export * from './types.js';
export {
  vllmAdapter,
  HANDOFF_PREFILL_KV,
  METASERVER_PATH,
  metaserverUrlFor,
  triggerPrefillKvParams,
  triggerPromptListError,
} from './vllm.js';
export { sglangAdapter, SGLANG_DEFAULT_BOOTSTRAP_PORT } from './sglang.js';
export {
  asSkippedHandoff,
  DEFAULT_HANDOFF_TTL_MS,
  handoffExpired,
  handoffTtlMs,
  NIXL_LEASE_TTL_MS,
} from './handoff-ttl.js';
export { withoutMotorFields } from './leg-kind.js';
export { metaserverRequestId, parseMetaserverKvFields, type MetaserverParse } from './metaserver-fields.js';
export {
  engineRequestIdCandidates,
  findByCandidates,
  requestIdForm,
  type RequestIdForm,
} from './engine-request-id.js';
export {
  clientForbiddenMarks,
  mayCarryClientForbiddenFields,
  stripClientForbiddenFields,
  type ClientFieldScope,
} from './client-fields.js';
export {
  normalizeResponseBody,
  normalizeResponseObject,
  SseNormalizer,
  type ClientRoute,
  type NormalizeOptions,
} from './client-response.js';

const ADAPTERS: Readonly<Record<EngineKind, EngineAdapter>> = Object.freeze({
  vllm: vllmAdapter,
  sglang: sglangAdapter,
});

/** The adapter for an engine kind. */
export function engineAdapterFor(kind: EngineKind): EngineAdapter {
  return ADAPTERS[kind];
}

export const ENGINE_ADAPTERS: readonly EngineAdapter[] = Object.values(ADAPTERS);
export {
  parseSglangServerInfo,
  resolveSglangBootstrapPort,
  urlPort,
  SGLANG_SERVER_INFO_PATHS,
  type SglangBootstrapPort,
  type SglangServerInfo,
} from './sglang-server-info.js';
export { decodeKvLoad, type KvLoad, type KvLoadVerdict } from './kv-load.js';
