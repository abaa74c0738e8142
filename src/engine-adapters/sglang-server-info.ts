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
  };
}

/**
 * The bootstrap port a SGLang prefill serves, in order of trust: what the engine reported, the
 * configured value, SGLang's own default (8998). Never the HTTP port: the bootstrap server is separate.
 */
export function resolveSglangBootstrapPort(reported: number | null, configured: number | null): number {
  return reported ?? configured ?? SGLANG_DEFAULT_BOOTSTRAP_PORT;
}
