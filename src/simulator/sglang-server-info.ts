import type { SimOptions } from './options.js';

/** What the simulator reports as SGLang's `version`. */
export const SIM_SGLANG_VERSION = '0.5.0-motor-sim';

/**
 * SGLang's `GET /server_info` body (deprecated alias `GET /get_server_info`): every ServerArgs field
 * flat at the top level, plus scheduler info, `internal_states` and `version` (sgl-project/sglang
 * python/sglang/srt/entrypoints/http_server.py `server_info`, 2026 index versions; fixture
 * sglang/server/server-info.json). The simulator reports the fields a coordinator reads and a few
 * scheduler limits. `disaggregation_mode` is ServerArgs' `Literal["null", "prefill", "decode"]`
 * (server_args.py): the STRING "null" for a union engine.
 * `api_key` / `admin_api_key` are left out: the simulator does not hand its credentials out.
 */
export function sglangServerInfo(
  opts: SimOptions,
  listening: { host: string; port: number },
  bootstrapPort: number | null,
): Record<string, unknown> {
  return {
    model_path: opts.model,
    served_model_name: opts.model,
    host: listening.host,
    port: listening.port,
    disaggregation_mode: opts.role === 'union' ? 'null' : opts.role,
    disaggregation_bootstrap_port: bootstrapPort ?? opts.bootstrapPort,
    disaggregation_transfer_backend: 'mooncake',
    tp_size: 1,
    dp_size: 1,
    page_size: opts.blockSize,
    context_length: opts.maxModelLen,
    max_running_requests: opts.maxNumSeqs,
    max_total_num_tokens: opts.kvBlocks * opts.blockSize,
    internal_states: [{ last_gen_throughput: 0 }],
    version: SIM_SGLANG_VERSION,
  };
}

/**
 * `GET /server_info` of SGLang's Rust server (`SGLANG_RUST_SERVER=1`): an allowlist with
 * `frontend: "rust"` and no ServerArgs fields (sgl-project/sglang rust/sglang-server/src/message/info.rs
 * `ServerInfo`, index 652614ed; fixture sglang/rust-server/server-info.json).
 */
export function rustSglangServerInfo(opts: SimOptions): Record<string, unknown> {
  return {
    model_path: opts.model,
    served_model_name: opts.model,
    tokenizer_path: opts.model,
    max_context_length: opts.maxModelLen,
    max_total_num_tokens: opts.kvBlocks * opts.blockSize,
    version: SIM_SGLANG_VERSION,
    frontend: 'rust',
    internal_states: [{ last_gen_throughput: 0 }],
  };
}
