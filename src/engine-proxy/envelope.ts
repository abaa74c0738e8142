import { withoutMotorFields, type EngineAdapter, type LegKind } from '../engine-adapters/index.js';
import {
  describeIssue,
  KV_STEERING_FIELDS,
  MOTOR_DISPATCH_KEY,
  MOTOR_PREFILL_RESULT_KEY,
  parseMotorDispatch,
  parsePrefillResult,
  type MotorDispatch,
  type PrefillResult,
  type EngineKind,
} from '../protocol/index.js';
import type { EngineProxyOptions, ProxyRole } from './options.js';
import { ProxyError } from './proxy-error.js';

/**
 * The envelope roles a proxy serves. A prefill also serves degraded single-instance dispatch
 * (conformance 15). A vLLM decode serves `single` too (the `fallback-decode-only` retry): its KV
 * connector acts only on requests that carry `kv_transfer_params`, so a plain request just runs. An
 * SGLang decode (`--disaggregation-mode decode`) cannot: every request it takes waits for a bootstrap peer.
 */
export function rolesAccepted(role: ProxyRole, engine: EngineKind): readonly string[] {
  if (role === 'union') return ['single'];
  if (role === 'prefill') return ['prefill', 'single'];
  return engine === 'vllm' ? ['decode', 'single'] : ['decode'];
}

/** A checked envelope: the dispatch, the leg it asks this engine for, and the body without Motor fields. */
export interface Envelope {
  dispatch: MotorDispatch;
  prefillResult: PrefillResult | null;
  body: Record<string, unknown>;
  leg: LegKind;
}

/** Validates the envelope, the role, the plan and the surrounding body (400s name the field). */
export function checkEnvelope(
  body: Record<string, unknown>,
  proxy: Pick<EngineProxyOptions, 'role' | 'engine' | 'dispatchCapabilities'>,
  adapter: EngineAdapter,
): Envelope | ProxyError {
  const parsed = parseMotorDispatch(body[MOTOR_DISPATCH_KEY]);
  if (!parsed.ok) return invalid(describeIssue(parsed.error), parsed.error.path);
  const dispatch = parsed.value;
  // Engine-native KV steering is refused next to an envelope (any engine).
  for (const key of KV_STEERING_FIELDS) {
    if (key in body) {
      return invalid(
        `'${key}' must not be sent next to ${MOTOR_DISPATCH_KEY}: the envelope alone steers KV transfer`,
        key,
      );
    }
  }
  const accepted = rolesAccepted(proxy.role, proxy.engine);
  if (!accepted.includes(dispatch.role)) {
    return new ProxyError(
      'role_mismatch',
      `${MOTOR_DISPATCH_KEY}.role: '${dispatch.role}' is not served here (this engine proxy has role ` +
        `${proxy.role} and accepts ${accepted.join(' or ')})`,
      { param: `${MOTOR_DISPATCH_KEY}.role` },
    );
  }
  if (dispatch.role !== 'single' && !proxy.dispatchCapabilities.includes(dispatch.dispatch_mode)) {
    return new ProxyError(
      'missing_capability',
      `${MOTOR_DISPATCH_KEY}.dispatch_mode: '${dispatch.dispatch_mode}' is not a capability of this engine ` +
        `(dispatch_capabilities: ${proxy.dispatchCapabilities.join(', ') || 'none'})`,
      { param: `${MOTOR_DISPATCH_KEY}.dispatch_mode` },
    );
  }
  const leg = adapter.legFor(dispatch);
  if (!leg.ok) return ProxyError.fromAdapter(leg);
  let prefillResult: PrefillResult | null = null;
  if (MOTOR_PREFILL_RESULT_KEY in body && leg.leg === 'handoff_decode') {
    const pr = parsePrefillResult(body[MOTOR_PREFILL_RESULT_KEY]);
    if (!pr.ok) return invalid(describeIssue(pr.error), pr.error.path);
    prefillResult = pr.value;
  }
  return { dispatch, prefillResult, body: withoutMotorFields(body), leg: leg.leg };
}

function invalid(message: string, param: string): ProxyError {
  return new ProxyError('invalid_request', message, { param });
}
