/**
 * The two engine requests any vLLM NIXL P/D proxy must make, shaped as Motor's handoff legs are
 * (src/coordinator/dispatch/leg-request.ts `prefillShapedBody`, src/engine-adapters/vllm.ts
 * `buildEngineRequest`): one home for the floors of bench:overhead (`direct-pd` in the bench process,
 * `node-min-pd` in node-min.ts), so both send what Motor sends.
 */
import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { prefillShapedBody } from '../../src/coordinator/dispatch/leg-request.js';
import { HANDOFF_PREFILL_KV } from '../../src/engine-adapters/index.js';

/** An engine request id like Motor's (`req-<uuid>#a1`): unique, so the prefill's held KV is this request's. */
export const engineRequestId = (): string => `req-${randomUUID()}#a1`;

/** The prefill leg: one length-capped token, non-stream, NIXL `do_remote_decode` (vllm.ts handoff_prefill). */
export function prefillLeg(
  body: Record<string, unknown>,
  id: string,
  path: string,
): Dispatcher.RequestOptions {
  const leg = {
    ...prefillShapedBody(body),
    request_id: id,
    kv_transfer_params: { ...HANDOFF_PREFILL_KV },
    min_tokens: 1,
  };
  return legRequest(path, id, JSON.stringify(leg));
}

/** The decode leg: the client's body with the prefill answer's `kv_transfer_params` verbatim (vllm.ts handoff_decode). */
export function decodeLeg(
  body: Record<string, unknown>,
  id: string,
  path: string,
  prefillAnswer: unknown,
): Dispatcher.RequestOptions {
  const kv = (prefillAnswer as { kv_transfer_params?: unknown } | null)?.kv_transfer_params;
  const leg: Record<string, unknown> = { ...body, request_id: id };
  if (kv !== null && kv !== undefined) leg.kv_transfer_params = kv;
  return legRequest(path, id, JSON.stringify(leg));
}

function legRequest(path: string, id: string, body: string): Dispatcher.RequestOptions {
  return {
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json', 'x-request-id': id },
    body,
  };
}
