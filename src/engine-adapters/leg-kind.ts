import { DispatchPlan, isMotorKey, MOTOR_DISPATCH_KEY } from '../protocol/index.js';
import type { MotorDispatch } from '../protocol/index.js';
import type { AdapterError, AdapterResult, LegKind } from './types.js';

export function adapterError(status: number, message: string, param: string | null = null): AdapterError {
  return { ok: false, status, message, param };
}

/** A copy of `body` without the Motor envelope keys (or any other `_motor_*` key). */
export function withoutMotorFields(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(body)) {
    if (isMotorKey(key)) continue;
    out[key] = body[key];
  }
  return out;
}

/**
 * Maps role + dispatch_mode onto a leg. `concurrentLeg` names the engine's concurrent flavour
 * (vLLM: trigger, SGLang: bootstrap); `handoff` says whether the engine can do prefill_handoff_decode.
 */
export function resolveLeg(
  dispatch: Pick<MotorDispatch, 'role' | 'dispatch_mode'>,
  concurrentLeg: 'trigger' | 'bootstrap',
  handoff: boolean,
  engineName: string,
): AdapterResult<{ leg: LegKind }> {
  if (dispatch.role === 'single') return { ok: true, leg: 'single' };
  const side = dispatch.role; // prefill | decode
  if (dispatch.dispatch_mode === DispatchPlan.PREFILL_HANDOFF_DECODE) {
    if (!handoff) {
      return adapterError(
        400,
        `${engineName} engines cannot run dispatch_mode '${dispatch.dispatch_mode}'`,
        `${MOTOR_DISPATCH_KEY}.dispatch_mode`,
      );
    }
    return { ok: true, leg: side === 'prefill' ? 'handoff_prefill' : 'handoff_decode' };
  }
  if (dispatch.dispatch_mode === DispatchPlan.CONCURRENT_ENGINE_SYNC) {
    return { ok: true, leg: `${concurrentLeg}_${side}` };
  }
  return adapterError(
    400,
    `unknown dispatch_mode '${dispatch.dispatch_mode}' (expected ${DispatchPlan.PREFILL_HANDOFF_DECODE} or ` +
      `${DispatchPlan.CONCURRENT_ENGINE_SYNC})`,
    `${MOTOR_DISPATCH_KEY}.dispatch_mode`,
  );
}

/** The `usage` object of an OpenAI-shaped response, or null. */
export function usageOf(responseBody: unknown): Record<string, unknown> | null {
  if (typeof responseBody !== 'object' || responseBody === null) return null;
  const usage = (responseBody as { usage?: unknown }).usage;
  return typeof usage === 'object' && usage !== null && !Array.isArray(usage)
    ? (usage as Record<string, unknown>)
    : null;
}
