import type { MetaserverShape } from './engine-profiles.js';

/** What a layer-wise decode knows when it allocates blocks for a `do_remote_prefill` request. */
export interface MetaserverFields {
  requestId: string;
  engineId: string;
  host: string;
  port: number;
  /** Blocks allocated for the external (remote) tokens; empty when none are needed. */
  blockIds: readonly number[];
  blockSize: number;
  /** Tokens the decode already has (vLLM request.num_computed_tokens). */
  cachedTokens: number;
}

/**
 * The body the decode's MooncakeLayerwiseConnector POSTs to `kv_transfer_params.metaserver`
 * (VA LW MooncakeLayerwiseConnectorScheduler.update_state_after_alloc; fixtures
 * vllm-ascend/layerwise-v0.13 … v0.17). TP/PCP/DCP sizes are 1.
 */
export function metaserverBody(shape: MetaserverShape, f: MetaserverFields): Record<string, unknown> {
  const body: Record<string, unknown> = {
    token_ids: [],
    request_id: f.requestId,
    do_remote_prefill: false,
    do_remote_decode: true,
    // ≥ v0.17: one list per KV-cache group, but a flat [] when num_external_tokens == 0 (v0.17.0rc1 … main).
    remote_block_ids: shape === 'v0.17' && f.blockIds.length > 0 ? [f.blockIds] : f.blockIds,
  };
  if (shape === 'v0.17') body.remote_block_size = [f.blockSize];
  body.remote_engine_id = f.engineId;
  body.remote_host = f.host;
  body.remote_port = f.port;
  // v0.13.0 / v0.14.0rc1 stop here; v0.15.0rc1 on add the parallel sizes and the cached tokens.
  if (shape === 'v0.13') return body;
  body.remote_tp_size = 1;
  body.remote_pcp_size = 1;
  body.remote_dcp_size = 1;
  body.remote_cached_tokens = f.cachedTokens;
  return body;
}
