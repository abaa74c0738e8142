import { SGLANG_DEFAULT_BOOTSTRAP_PORT } from './sglang.js';

/**
 * Where SGLang reports its server arguments: `GET /server_info` (newest), `GET /get_server_info`
 * (older releases; a deprecated alias in newer ones). Ask in this order.
 * sgl-project/sglang python/sglang/srt/entrypoints/http_server.py `server_info` (2026 index versions).
 */
export const SGLANG_SERVER_INFO_PATHS = ['/server_info', '/get_server_info'] as const;

/** What a coordinator needs from SGLang's server info (every ServerArgs field is a top-level key). */
export interface SglangServerInfo {
  /** `disaggregation_mode`: `prefill`, `decode` or `null` (no P/D). */
  disaggregationMode: 'prefill' | 'decode' | null;
  /** `disaggregation_bootstrap_port` (ServerArgs default 8998), or null when absent/invalid. */
  bootstrapPort: number | null;
  /** `served_model_name`, else `model_path`, or null. */
  model: string | null;
  /** `version`, or null. */
  version: string | null;
  /**
   * `frontend: "rust"`: SGLang's Rust server (`SGLANG_RUST_SERVER=1`). Its `/server_info` is an
   * allowlist without ServerArgs fields (sgl-project/sglang rust/sglang-server/src/message/info.rs
   * `ServerInfo`, index 652614ed), so mode and bootstrap port read null there.
   */
  rustFrontend: boolean;
}

function isPort(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535;
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

/** Reads a `/server_info` JSON body; null when it is not an object. Unknown modes read as null. */
export function parseSglangServerInfo(json: unknown): SglangServerInfo | null {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return null;
  const info = json as Record<string, unknown>;
  const mode = info.disaggregation_mode;
  return {
    disaggregationMode: mode === 'prefill' || mode === 'decode' ? mode : null,
    bootstrapPort: isPort(info.disaggregation_bootstrap_port) ? info.disaggregation_bootstrap_port : null,
    model: nonEmptyString(info.served_model_name) ?? nonEmptyString(info.model_path),
    version: nonEmptyString(info.version),
    rustFrontend: info.frontend === 'rust',
  };
}

/** Where a SGLang prefill serves its bootstrap registry, and which source said so. */
export interface SglangBootstrapPort {
  port: number;
  from: 'engine' | 'rust-server' | 'config' | 'default';
}

/**
 * The bootstrap port a SGLang prefill serves, in order of trust:
 * - SGLang's Rust server serves the registry on the HTTP listener itself and resolves
 *   `disaggregation_bootstrap_port` to `--port` (sgl-project/sglang
 *   python/sglang/srt/arg_groups/pd_disaggregation_hook.py `_alias_bootstrap_port_to_api_port`;
 *   rust/sglang-server/src/api_server/disaggregation/bootstrap.rs, "bootstrap port = api port"), when
 *   the engine says so (`frontend: "rust"`) or the operator does (`onHttpPort`);
 * - what the Python server reported (`disaggregation_bootstrap_port`);
 * - the configured value; SGLang's own default, 8998 (its Python server's bootstrap server is a
 *   listener of its own, `disaggregation/common/conn.py` CommonKVBootstrapServer).
 */
export function resolveSglangBootstrapPort(
  reported: Pick<SglangServerInfo, 'bootstrapPort' | 'rustFrontend'> | null,
  configured: number | null,
  http: { port: number | null; onHttpPort?: boolean } = { port: null },
): SglangBootstrapPort {
  const rust = reported?.rustFrontend === true || http.onHttpPort === true;
  if (rust && http.port !== null) return { port: http.port, from: 'rust-server' };
  if (reported?.bootstrapPort != null) return { port: reported.bootstrapPort, from: 'engine' };
  if (configured !== null) return { port: configured, from: 'config' };
  return { port: SGLANG_DEFAULT_BOOTSTRAP_PORT, from: 'default' };
}

/** The port of an `http(s)://host:port` URL, the scheme's default when none is written; null if unparsable. */
export function urlPort(url: string): number | null {
  try {
    const u = new URL(url);
    if (u.port) return Number(u.port);
    return u.protocol === 'https:' ? 443 : u.protocol === 'http:' ? 80 : null;
  } catch {
    return null;
  }
}
