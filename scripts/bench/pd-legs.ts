/**
 * The two engine requests any vLLM NIXL P/D proxy must make, built by Motor's own vLLM adapter
 * (src/engine-adapters/vllm.ts `buildEngineRequest` handoff_prefill / handoff_decode, on the body
 * `prefillShapedBody` shapes) so the floors of bench:overhead (`direct-pd` in the bench process,
 * `node-min-pd` in node-min.ts) send exactly what Motor sends, with no engine rule written again here.
 */
import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { prefillShapedBody } from '../../src/coordinator/dispatch/transport/leg-request.js';
import { vllmAdapter } from '../../src/engine-adapters/index.js';
import {
  buildPrefillResult,
  MOTOR_DISPATCH_SCHEMA_VERSION,
  type MotorDispatch,
} from '../../src/protocol/index.js';

/** An engine request id like Motor's (`req-<uuid>#a1`): unique, so the prefill's held KV is this request's. */
export const engineRequestId = (): string => `req-${randomUUID()}#a1`;

const dispatchOf = (id: string, role: 'prefill' | 'decode'): MotorDispatch => ({
  schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
  root_request_id: id,
  engine_request_id: id,
  pair_id: 'bench',
  attempt_seq: 1,
  role,
  dispatch_mode: 'prefill_handoff_decode',
  endpoints: { prefill: null, decode: null },
});

/** The prefill leg (handoff_prefill). */
export function prefillLeg(
  body: Record<string, unknown>,
  id: string,
  path: string,
): Dispatcher.RequestOptions {
  const built = vllmAdapter.buildEngineRequest('handoff_prefill', {
    body: prefillShapedBody(body),
    dispatch: dispatchOf(id, 'prefill'),
  });
  if (!built.ok) throw new Error(built.message);
  return legRequest(path, built.headers, built.body);
}

/** The decode leg (handoff_decode) with the prefill answer's KV, as the adapter reads it. */
export function decodeLeg(
  body: Record<string, unknown>,
  id: string,
  path: string,
  prefillAnswer: unknown,
): Dispatcher.RequestOptions {
  const parsed = vllmAdapter.parsePrefillResponse('handoff_prefill', prefillAnswer);
  if (!parsed.ok) throw new Error(parsed.message);
  const prefillResult = buildPrefillResult({
    root_request_id: id,
    engine_request_id: id,
    pair_id: 'bench',
    attempt_seq: 1,
    status: parsed.skipped === true ? 'skipped' : 'completed',
    handoff_mode: 'handoff',
    payload: parsed.payload,
    usage: parsed.usage,
  });
  const built = vllmAdapter.buildEngineRequest('handoff_decode', {
    body,
    dispatch: dispatchOf(id, 'decode'),
    prefillResult,
  });
  if (!built.ok) throw new Error(built.message);
  return legRequest(path, built.headers, built.body);
}

function legRequest(
  path: string,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Dispatcher.RequestOptions {
  return {
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  };
}
