import type { PrefillResult } from '../protocol/index.js';

/**
 * How long a prefill engine holds the KV blocks of a finished handoff prefill for its decode.
 *
 * - vLLM NixlConnector of 2026-01 and vllm-ascend MooncakeConnector free unread blocks after the
 *   abort timeout: `VLLM_NIXL_ABORT_REQUEST_TIMEOUT` (VL nixl_connector.py, NIXL_CONNECTOR_VERSION 2;
 *   VA mooncake_connector.py v0.13.0) / `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` (VA v0.18.0, main),
 *   480 s — the engine proxy's `--handoff-ttl-ms` default.
 * - Newest vLLM NIXL holds them on a lease, `kv_lease_duration` (default 30 s), that the decode's
 *   heartbeats renew once it has started (VL `…/v1/nixl/base_scheduler.py`
 *   `NixlBaseConnectorScheduler.__init__`, index 0050936b22). Its answers carry `transfer_mode`
 *   (`…/v1/nixl/pull_scheduler.py` `NixlPullConnectorScheduler.request_finished`), which older
 *   connectors never send. Push mode (`NixlPushConnector`) holds the finished prefill's blocks on the
 *   same lease and answers `transfer_mode: "push"` (`…/v1/nixl/push_scheduler.py`
 *   `NixlPushConnectorScheduler.request_finished`, index 0316d25ab5).
 *
 * `remote_blocks_expiry_time` is NOT a deadline Motor can use: it is `time.perf_counter() + ttl`
 * (seconds on the engine process's own monotonic clock) and only set when the answering engine is
 * the decode of a bidirectional transfer; a prefill always sends null (same function).
 */
export const NIXL_LEASE_TTL_MS = 30_000;

/** The abort-timeout default of the legacy connectors (480 s); direct mode's handoff TTL. */
export const DEFAULT_HANDOFF_TTL_MS = 480_000;

/** The handoff TTL for this prefill payload, given the configured one (legacy connectors). */
export function handoffTtlMs(payload: Readonly<Record<string, unknown>>, configuredMs: number): number {
  return 'transfer_mode' in payload ? Math.min(configuredMs, NIXL_LEASE_TTL_MS) : configuredMs;
}

/** Whether a completed handoff result can no longer be read: its KV blocks are freed by now. */
export function handoffExpired(
  result: Pick<PrefillResult, 'status' | 'expires_at_ms'>,
  nowMs: number,
): boolean {
  return result.status === 'completed' && result.expires_at_ms !== null && nowMs >= result.expires_at_ms;
}

/**
 * The result a decode should run with when the handoff cannot be read (expired): `skipped`, empty
 * payload — a plain decode that recomputes the prompt, as for a prefill that returned no KV params.
 */
export function asSkippedHandoff(result: PrefillResult): PrefillResult {
  return { ...result, status: 'skipped', payload: {}, expires_at_ms: null };
}
