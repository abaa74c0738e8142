/**
 * Engine profiles: which wire behaviour `motor sim` imitates, one row per (engine, release family).
 * Every switch cites where it was read upstream (facts: test/fixtures/engines/README.md; VA =
 * vllm-project/vllm-ascend, VL = vllm-project/vllm). The simulator reads behaviour from here only.
 */

export type SimEngine = 'vllm' | 'vllm-ascend' | 'sglang';

/** Shape of the handoff prefill's `kv_transfer_params` (builder: handoff-params.ts). */
export type HandoffShape =
  | 'nixl-2026-01'
  | 'nixl-newest'
  | 'nixl-push'
  | 'mooncake-v0.13'
  | 'mooncake-v0.14'
  | 'mooncake-v0.15'
  | 'mooncake-main'
  | 'mooncake-hybrid-main';

/** Shape of the layer-wise decode's metaserver body (builder: metaserver-call.ts). */
export type MetaserverShape = 'v0.13' | 'v0.15' | 'v0.17';

export interface EngineProfile {
  engine: SimEngine;
  version: string;
  /** Handoff prefill params (null: the engine has no handoff connector, e.g. SGLang). */
  handoff: HandoffShape | null;
  /** With `--kv-connector MooncakeHybridConnector`: the hybrid connector's params (null: not in this release). */
  hybridHandoff: HandoffShape | null;
  /** An EOS/stop-string-ended prefill (FINISHED_STOPPED) still returns params. */
  paramsOnEos: boolean;
  /** Default hold of unread handoff KV (ms): NIXL/Mooncake abort timeout, or newest NIXL's lease. */
  leaseMs: number;
  /** A waiting handoff decode renews the prefill's lease by heartbeats (newest NIXL only). */
  heartbeat: boolean;
  /** vLLM ≥ 0.14 engine-internal ids are `<external id>-<8 hex>` (remote_request_id carries them). */
  internalIdSuffix: boolean;
  /** Layer-wise metaserver body (null: the engine has no trigger flow, e.g. SGLang). */
  metaserver: MetaserverShape | null;
  /** The metaserver `request_id` carries vLLM's random suffix (the internal id) instead of the external id. */
  metaserverIdSuffix: boolean;
  /** RecomputeScheduler's final frame: repeats the last token, carries none, or no such scheduler. */
  recompute: 'repeat-last-token' | 'no-token' | null;
  /** Chat message / delta key(s) of reasoning text (with a reasoning parser). */
  reasoningKeys: readonly ReasoningKey[];
  /**
   * NIXL push mode: the decode registers its blocks with the prefill, which writes into them; the
   * default `push_registration_timeout` (ms) a registration waits for that write. null: pull mode.
   */
  pushRegistrationMs: number | null;
  /** SGLang's Rust server: the bootstrap registry is served on the HTTP port (no separate one). */
  bootstrapOnHttpPort: boolean;
}

export type ReasoningKey = 'reasoning' | 'reasoning_content';

/**
 * vLLM renamed `reasoning_content` to `reasoning` in PR 27752 (merged 2025-10-31, keeping the old
 * name beside it for compatibility) and removed `reasoning_content` in PR 33402 (merged
 * 2026-01-30): vllm/entrypoints/openai/chat_completion/protocol.py ChatMessage and
 * generate/base/protocol.py DeltaMessage (main 2026) carry `reasoning` only. Releases of the
 * compatibility window (vLLM 0.12–0.15, which vllm-ascend v0.13–v0.16 run on) send both.
 */
const REASONING_NEW: readonly ReasoningKey[] = ['reasoning'];
const REASONING_BOTH: readonly ReasoningKey[] = ['reasoning', 'reasoning_content'];

/** VLLM_NIXL_ABORT_REQUEST_TIMEOUT / VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT default (README facts 13, 26). */
const ABORT_TIMEOUT_MS = 480_000;
/** Newest NIXL `kv_lease_duration` default, 30 s (VL nixl/base_scheduler.py NixlBaseConnectorScheduler.__init__). */
const NIXL_LEASE_MS = 30_000;
/** `decoder_kv_blocks_ttl` default, 480 s (same function): push_registration_timeout's default. */
const DECODER_KV_BLOCKS_TTL_MS = 480_000;

/** Switches no profile but the push and Rust-server rows turn on. */
const NOT_PUSH_OR_RUST = { pushRegistrationMs: null, bootstrapOnHttpPort: false } as const;

const ASCEND: Omit<
  EngineProfile,
  'version' | 'handoff' | 'metaserver' | 'metaserverIdSuffix' | 'recompute' | 'reasoningKeys'
> = {
  ...NOT_PUSH_OR_RUST,
  engine: 'vllm-ascend',
  hybridHandoff: null,
  // VA kv_p2p/mooncake_connector.py MooncakeConnectorScheduler.request_finished, every tag v0.13.0 … main:
  // params only for FINISHED_LENGTH_CAPPED (hybrid connector on main too).
  paramsOnEos: false,
  // VA mooncake_connector.py (v0.13.0–v0.17.0rc1 VLLM_NIXL_…, v0.18.0/main VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT).
  leaseMs: ABORT_TIMEOUT_MS,
  heartbeat: false,
  // vllm-ascend v0.14.0rc1+ runs on vLLM ≥ 0.14 (VL v1/engine/input_processor.py assign_request_id).
  internalIdSuffix: true,
};

/** Newest first within each engine: the first row of an engine is its default. */
export const ENGINE_PROFILES: readonly EngineProfile[] = [
  {
    ...NOT_PUSH_OR_RUST,
    engine: 'vllm',
    version: 'nixl-newest',
    // VL kv_connector/v1/nixl/pull_scheduler.py NixlPullConnectorScheduler.request_finished (index 0050936b22).
    handoff: 'nixl-newest',
    hybridHandoff: null,
    paramsOnEos: true, // same function: FINISHED_LENGTH_CAPPED and FINISHED_STOPPED
    leaseMs: NIXL_LEASE_MS,
    // VL nixl/base_scheduler.py on_new_request / build_connector_meta: every kv_lease_duration // 6.
    heartbeat: true,
    internalIdSuffix: true,
    // vLLM has no layer-wise connector: the trigger flow is served as vllm-ascend main does (VA LW).
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    recompute: null,
    reasoningKeys: REASONING_NEW,
  },
  {
    // `kv_connector: NixlPushConnector` (VL kv_connector/factory.py registers it beside NixlPullConnector).
    engine: 'vllm',
    version: 'nixl-push',
    // VL kv_connector/v1/nixl/push_scheduler.py NixlPushConnectorScheduler.request_finished (index
    // 0316d25ab5): the pull answer's keys but dcp_size and remote_blocks_expiry_time, transfer_mode "push".
    handoff: 'nixl-push',
    hybridHandoff: null,
    paramsOnEos: true, // same function: FINISHED_LENGTH_CAPPED and FINISHED_STOPPED
    // Same function: the prefill keeps the blocks for kv_lease_duration (base scheduler's lease).
    leaseMs: NIXL_LEASE_MS,
    heartbeat: true, // NixlBaseConnectorScheduler.on_new_request is shared by pull and push
    internalIdSuffix: true,
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    recompute: null,
    // NixlPushConnectorScheduler.__init__: push_registration_timeout defaults to decoder_kv_blocks_ttl.
    pushRegistrationMs: DECODER_KV_BLOCKS_TTL_MS,
    bootstrapOnHttpPort: false,
    reasoningKeys: REASONING_NEW, // the same OpenAI server as nixl-newest
  },
  {
    ...NOT_PUSH_OR_RUST,
    engine: 'vllm',
    version: 'nixl-2026-01',
    // VL kv_connector/v1/nixl_connector.py NixlConnectorScheduler.request_finished (NIXL_CONNECTOR_VERSION 2,
    // index 002a1057e9): params only for FINISHED_LENGTH_CAPPED; KV freed after VLLM_NIXL_ABORT_REQUEST_TIMEOUT.
    handoff: 'nixl-2026-01',
    hybridHandoff: null,
    paramsOnEos: false,
    leaseMs: ABORT_TIMEOUT_MS,
    heartbeat: false,
    internalIdSuffix: true, // remote_request_id = internal id with suffix (fixture prefill-response.chat.json)
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    recompute: null,
    reasoningKeys: REASONING_BOTH,
  },
  {
    ...ASCEND,
    version: 'main',
    // VA kv_p2p/mooncake_connector.py request_finished, main 182b75ea84: per-group ids + remote_block_size.
    handoff: 'mooncake-main',
    // VA kv_p2p/mooncake_hybrid_connector.py MooncakeHybridConnectorScheduler.request_finished (main, v0.23.0).
    hybridHandoff: 'mooncake-hybrid-main',
    // VA LW update_state_after_alloc, main: per-group ids, flat [] when num_external_tokens == 0.
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    // VA core/recompute_scheduler.py _add_recomputed_outputs (v0.15.0rc1 … main): new_token_ids=[].
    recompute: 'no-token',
    reasoningKeys: REASONING_NEW,
  },
  {
    ...ASCEND,
    version: 'v0.18',
    // VA mooncake_connector.py request_finished v0.15.0rc1 … v0.18.0: + remote_ptp_size, flat ids.
    handoff: 'mooncake-v0.15',
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    recompute: 'no-token',
    reasoningKeys: REASONING_NEW,
  },
  {
    ...ASCEND,
    version: 'v0.17',
    handoff: 'mooncake-v0.15',
    // VA LW update_state_after_alloc v0.17.0rc1: remote_block_ids per KV group, remote_block_size list.
    metaserver: 'v0.17',
    metaserverIdSuffix: false,
    recompute: 'no-token',
    reasoningKeys: REASONING_NEW,
  },
  {
    ...ASCEND,
    version: 'v0.15',
    handoff: 'mooncake-v0.15',
    // VA LW update_state_after_alloc v0.15.0rc1/v0.16.0rc1: flat ids + tp/pcp/dcp sizes + cached tokens;
    // get_external_request_id strips vLLM's suffix (PR #6360).
    metaserver: 'v0.15',
    metaserverIdSuffix: false,
    recompute: 'no-token',
    reasoningKeys: REASONING_BOTH,
  },
  {
    ...ASCEND,
    version: 'v0.14',
    // VA mooncake_connector.py request_finished v0.14.0rc1: + remote_request_id, no remote_ptp_size.
    handoff: 'mooncake-v0.14',
    // VA LW update_state_after_alloc v0.14.0rc1: v0.13 body, request.request_id sent raw (with suffix).
    metaserver: 'v0.13',
    metaserverIdSuffix: true,
    // VA core/recompute_scheduler.py update_from_output v0.13.0/v0.14.0rc1: new_token_ids=[last token].
    recompute: 'repeat-last-token',
    reasoningKeys: REASONING_BOTH,
  },
  {
    ...ASCEND,
    version: 'v0.13',
    // VA mooncake_connector.py request_finished v0.13.0: no remote_request_id.
    handoff: 'mooncake-v0.13',
    // vLLM 0.13 has no id suffix (VL input_processor.py assign_request_id arrived in 0.14, PR #27987).
    internalIdSuffix: false,
    // VA mooncake_layerwise_connector.py update_state_after_alloc v0.13.0: flat ids, no sizes.
    metaserver: 'v0.13',
    metaserverIdSuffix: false,
    recompute: 'repeat-last-token',
    reasoningKeys: REASONING_BOTH,
  },
  {
    ...NOT_PUSH_OR_RUST,
    // SGLang (sgl-project/sglang, code-index version 001c2ae0 of disaggregation/mini_lb.py and
    // server_args.py): bootstrap flow only; the sim-sglang profile owns its details.
    engine: 'sglang',
    version: 'index-001c2ae',
    handoff: null,
    hybridHandoff: null,
    paramsOnEos: false,
    leaseMs: ABORT_TIMEOUT_MS,
    heartbeat: false,
    internalIdSuffix: false,
    metaserver: null,
    metaserverIdSuffix: false,
    recompute: null,
    // SGLang python/sglang/srt/entrypoints/openai/protocol.py ChatMessage / DeltaMessage.
    reasoningKeys: ['reasoning_content'],
  },
  {
    // SGLang with SGLANG_RUST_SERVER=1 (sgl-project/sglang, index versions of 2026): a prefill serves
    // the bootstrap registry on its API listener (rust/sglang-server/src/api_server/disaggregation/
    // bootstrap.rs, "bootstrap port = api port"; python/sglang/srt/arg_groups/pd_disaggregation_hook.py
    // `_alias_bootstrap_port_to_api_port`), and `/server_info` is the Rust frontend's allowlist with
    // `frontend: "rust"` and no ServerArgs fields (rust/sglang-server/src/message/info.rs `ServerInfo`).
    engine: 'sglang',
    version: 'rust-server',
    handoff: null,
    hybridHandoff: null,
    paramsOnEos: false,
    leaseMs: ABORT_TIMEOUT_MS,
    heartbeat: false,
    internalIdSuffix: false,
    metaserver: null,
    metaserverIdSuffix: false,
    recompute: null,
    pushRegistrationMs: null,
    bootstrapOnHttpPort: true,
    // As the index-001c2ae row; the Rust frontend's reasoning output was not read.
    reasoningKeys: ['reasoning_content'],
  },
];

/** Release families accepted by `--engine-version`, per engine, newest first. */
export const ENGINE_VERSIONS: Readonly<Record<SimEngine, readonly string[]>> = {
  vllm: versionsOf('vllm'),
  'vllm-ascend': versionsOf('vllm-ascend').flatMap((v) => (v === 'v0.15' ? ['v0.16', v] : [v])),
  sglang: versionsOf('sglang'),
};

function versionsOf(engine: SimEngine): string[] {
  return ENGINE_PROFILES.filter((p) => p.engine === engine).map((p) => p.version);
}

/** vllm-ascend v0.16.0rc1 behaves as v0.15.0rc1 in every switch above (README fact 4). */
const ALIASES: Readonly<Record<string, string>> = { 'vllm-ascend/v0.16': 'v0.15' };

/** The profile of `engine` at `version` (null: the newest); a one-line error for an unknown one. */
export function resolveProfile(engine: SimEngine, version: string | null): EngineProfile {
  const rows = ENGINE_PROFILES.filter((p) => p.engine === engine);
  if (rows.length === 0) {
    throw new Error(`unknown engine '${engine}' (expected one of: vllm, vllm-ascend, sglang)`);
  }
  if (version === null) return rows[0]!;
  const wanted = ALIASES[`${engine}/${version}`] ?? version;
  const row = rows.find((p) => p.version === wanted);
  if (!row) {
    throw new Error(
      `unknown --engine-version '${version}' for --engine ${engine} (expected one of: ${ENGINE_VERSIONS[engine].join(', ')})`,
    );
  }
  return row;
}
