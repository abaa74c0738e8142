import type { PeerSecretSource } from '../common/peer-secrets.js';
import { DEFAULT_SERVER_LIMITS, type ServerLimits } from '../common/server-limits.js';
import type { EngineKind } from '../protocol/index.js';

export type ProxyRole = 'prefill' | 'decode' | 'union';

/** Every engine-proxy setting; `motor engine-proxy` flags map 1:1 onto these (README "motor engine-proxy"). */
/** Listener limits: `--headers-timeout-ms`, `--request-timeout-ms`, … (common/server-limits.ts). */
export interface EngineProxyOptions extends ServerLimits {
  engineUrl: string;
  role: ProxyRole;
  engine: EngineKind;
  /** Capabilities advertised (from the engine config); P/D roles refuse to start with none. */
  dispatchCapabilities: string[];
  dispatchProfile: string;
  /** The KV connector classified from `--engine-config` (`/v1/motor/info` `kv_connector`); null/absent = none. */
  kvConnector?: string | null;
  host: string;
  port: number;
  /** SGLang prefill: bootstrap host handed to both legs (default: the engine URL's host). */
  bootstrapHost: string | null;
  /**
   * SGLang prefill: the configured bootstrap port. The engine's own report (`GET /server_info`) wins;
   * without either, SGLang's default 8998. SGLang's Rust server serves it on the HTTP port
   * (`bootstrapOnHttpPort`, or its `/server_info` says `frontend: "rust"`).
   */
  bootstrapPort: number | null;
  /** SGLang prefill run with `SGLANG_RUST_SERVER=1`: the bootstrap registry is on the engine's HTTP port. */
  bootstrapOnHttpPort?: boolean;
  /** Bearer key sent on every engine call (`--engine-api-key`); never logged nor shown. */
  engineApiKey?: string | null;
  /** Key for SGLang's admin-optional `/abort_request` (`--engine-admin-api-key`); else `engineApiKey`. */
  engineAdminApiKey?: string | null;
  /**
   * The shared peer secret (`--peer-secret-file`, else `MOTOR_PEER_SECRET`): required on dispatch, stop
   * and pass-through calls, sent on peer stops, and the key of per-attempt metaserver URLs. Absent or
   * null: none (a warning at start).
   */
  peerSecret?: PeerSecretSource | null;
  /** Peer base URLs this proxy may call (`http://host:port` or `http://host:*`). */
  peerAllow: string[];
  stopTtlMs: number;
  maxTrackedAttempts: number;
  maxActiveAttempts: number;
  preparedTtlMs: number;
  maxPrepared: number;
  handoffTtlMs: number;
  metaserverWaitMs: number;
  peerTimeoutMs: number;
  engineTimeoutMs: number;
  engineConnections: number;
  maxBodyBytes: number;
}

/** The one proxy role that serves a bootstrap address (an SGLang prefill). */
export function isSglangPrefill(opts: Pick<EngineProxyOptions, 'engine' | 'role'>): boolean {
  return opts.engine === 'sglang' && opts.role === 'prefill';
}

export const ENGINE_PROXY_DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  stopTtlMs: 60_000,
  maxTrackedAttempts: 100_000,
  maxActiveAttempts: 10_000,
  preparedTtlMs: 30_000,
  maxPrepared: 10_000,
  // vLLM's NIXL connector frees blocks a decode never read after 480 s (VLLM_NIXL_ABORT_REQUEST_TIMEOUT).
  handoffTtlMs: 480_000,
  metaserverWaitMs: 5_000,
  peerTimeoutMs: 2_000,
  engineTimeoutMs: 600_000,
  engineConnections: 256,
  maxBodyBytes: 8 * 1024 * 1024,
  ...DEFAULT_SERVER_LIMITS,
});
