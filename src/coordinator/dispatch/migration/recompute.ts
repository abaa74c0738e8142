import { isPlainObject } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';
import type { Leg } from '../transport/leg.js';

/**
 * vllm-ascend's RecomputeScheduler preempts a running decode and ends it with `finish_reason:
 * "stop"`, `stop_reason: "recomputed"` (VA `vllm_ascend/core/recompute_scheduler.py`
 * `update_from_output`; main `_add_recomputed_outputs`). v0.13.0/v0.14.0rc1 repeat the last token in
 * that output, v0.15.0rc1 on carry none; either way the answer is unfinished, and the frame is never
 * relayed. Its proxies re-dispatch (VA load_balance_proxy_server_example.py, all tags); Motor retries
 * before commit and migrates after it (migration.ts).
 *
 * The bytes a relay scans for before it parses a frame or body; vLLM writes compact JSON, and the
 * marker also matches `"stop_reason": "recomputed"`. A match only costs a parse (`isRecomputed`).
 */
export const RECOMPUTED_MARK = Buffer.from('"recomputed"');

/** Whether a response object or chunk was ended by the recompute scheduler. */
export function isRecomputed(obj: Record<string, unknown>): boolean {
  const choices = obj.choices;
  if (!Array.isArray(choices)) return false;
  for (const c of choices) if (isPlainObject(c) && c.stop_reason === 'recomputed') return true;
  return false;
}

/**
 * The failure of an attempt whose decode was preempted: retryable (before commit a new attempt
 * serves the request), never charged to the instance's circuit breaker (no `instanceId`: it is
 * preemption under load, not an engine fault — scheduling-adapter.ts `legOutcome`).
 */
export function recomputedError(leg: Leg): MotorError {
  return new MotorError(
    'decode_recomputed',
    `${leg.role} instance ${leg.instance.id} preempted the request (stop_reason "recomputed")`,
  );
}
