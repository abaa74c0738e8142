import type { HandoffShape } from './engine-profiles.js';

/** What a handoff prefill knows when its request finishes (ids, address, sizes are this simulator's). */
export interface HandoffFields {
  engineId: string;
  /** Engine-internal request id (the key the decode pulls by). */
  requestId: string;
  host: string;
  port: number;
  blockIds: number[];
  blockSize: number;
  promptTokens: number;
  /** Token id of the request's last output token. */
  lastTokenId: number;
}

/**
 * The handoff prefill's `kv_transfer_params`, key for key in the order upstream builds them
 * (fixtures test/fixtures/engines/vllm/nixl-* and vllm-ascend/mooncake-*; TP/PCP/DCP/PP sizes are 1).
 */
export function handoffParams(shape: HandoffShape, f: HandoffFields): Record<string, unknown> {
  const head = { do_remote_prefill: true, do_remote_decode: false };
  switch (shape) {
    // VL v1/nixl_connector.py NixlConnectorScheduler.request_finished (NIXL_CONNECTOR_VERSION 2).
    case 'nixl-2026-01':
      return {
        ...head,
        remote_block_ids: f.blockIds,
        remote_engine_id: f.engineId,
        remote_request_id: f.requestId,
        remote_host: f.host,
        remote_port: f.port,
        tp_size: 1,
      };
    // VL v1/nixl/pull_scheduler.py NixlPullConnectorScheduler.request_finished (index 0050936b22).
    case 'nixl-newest':
      return {
        ...head,
        remote_block_ids: [f.blockIds],
        remote_engine_id: f.engineId,
        remote_request_id: f.requestId,
        remote_host: f.host,
        remote_port: f.port,
        tp_size: 1,
        dcp_size: 1,
        pp_size: 1,
        remote_num_tokens: f.promptTokens,
        remote_blocks_expiry_time: null,
        transfer_mode: 'pull',
      };
    // VL v1/nixl/push_scheduler.py NixlPushConnectorScheduler.request_finished (index 0316d25ab5).
    case 'nixl-push':
      return {
        ...head,
        remote_block_ids: [f.blockIds],
        remote_engine_id: f.engineId,
        remote_request_id: f.requestId,
        remote_host: f.host,
        remote_port: f.port,
        tp_size: 1,
        pp_size: 1,
        remote_num_tokens: f.promptTokens,
        transfer_mode: 'push',
      };
    // VA kv_p2p/mooncake_hybrid_connector.py MooncakeHybridConnectorScheduler.request_finished (main).
    case 'mooncake-hybrid-main':
      return {
        ...head,
        remote_block_ids: [f.blockIds],
        remote_engine_id: f.engineId,
        remote_request_id: f.requestId,
        remote_host: f.host,
        remote_port: f.port,
        remote_ptp_size: 1,
        ...mooncakeTail(f),
      };
    // VA mooncake_connector.py MooncakeConnectorScheduler.request_finished: v0.13.0 no remote_request_id,
    // v0.14.0rc1 adds it, v0.15.0rc1 … v0.18.0 add remote_ptp_size, main: per-group ids + remote_block_size.
    default: {
      const main = shape === 'mooncake-main';
      return {
        ...head,
        remote_block_ids: main ? [f.blockIds] : f.blockIds,
        remote_engine_id: f.engineId,
        ...(shape === 'mooncake-v0.13' ? {} : { remote_request_id: f.requestId }),
        remote_host: f.host,
        remote_port: f.port,
        remote_pcp_size: 1,
        remote_dcp_size: 1,
        ...(shape === 'mooncake-v0.13' || shape === 'mooncake-v0.14' ? {} : { remote_ptp_size: 1 }),
        ...mooncakeTail(f),
        ...(main ? { remote_block_size: f.blockSize } : {}),
      };
    }
  }
}

function mooncakeTail(f: HandoffFields): Record<string, unknown> {
  return {
    last_token_id: f.lastTokenId,
    remote_multi_nodes_meta_mapping: { '0': { host: f.host, engine_id: f.engineId } },
    num_prompt_blocks: Math.ceil(f.promptTokens / f.blockSize),
  };
}
