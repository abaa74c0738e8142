import { parseJson } from '../common/http.js';
import { stringifyWithBigInt } from '../common/json-bigint.js';
import { handoffTtlMs } from '../engine-adapters/index.js';
import { buildPrefillResult } from '../protocol/index.js';
import { sendRaw } from './engine-reply.js';
import type { Envelope } from './envelope.js';
import type { EngineCallProfile, LegAttempt } from './leg-attempt.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError } from './proxy-error.js';

/** An engine error on a prefill leg is relayed as JSON, without the request id. */
const PREFILL: EngineCallProfile = { legName: null, relayContentType: false, tagRequestId: false };

/**
 * Handoff or bootstrap prefill: run it on the engine, answer a `PrefillResult` — `skipped` (empty
 * payload, no expiry) when the engine kept no KV for the decode.
 */
export async function runPrefillLeg(
  ctx: ProxyContext,
  attempt: LegAttempt,
  env: Envelope,
  path: string,
): Promise<void> {
  const { dispatch, leg } = env;
  const built = ctx.adapter.buildEngineRequest(leg, {
    body: env.body,
    dispatch,
    bootstrap: leg === 'bootstrap_prefill' ? ctx.selfBootstrap : null,
  });
  if (!built.ok) return attempt.refuse('rejected', ProxyError.fromAdapter(built), null);
  const ctl = attempt.wireAbort();
  const reply = await attempt.callEngineWhole(PREFILL, path, built, ctl.signal);
  if (reply === null) return;
  const json = parseJson(Buffer.from(reply.text));
  const parsed = ctx.adapter.parsePrefillResponse(leg, json.ok ? json.value : null);
  if (!parsed.ok) return attempt.refuse('engine_error', ProxyError.fromAdapter(parsed), parsed.message);
  const handoff = leg === 'handoff_prefill';
  const skipped = parsed.skipped === true;
  const result = buildPrefillResult({
    root_request_id: dispatch.root_request_id,
    engine_request_id: dispatch.engine_request_id,
    pair_id: dispatch.pair_id,
    attempt_seq: dispatch.attempt_seq,
    status: skipped ? 'skipped' : 'completed',
    handoff_mode: handoff ? 'handoff' : 'bootstrap',
    payload: parsed.payload,
    usage: parsed.usage,
    expires_at_ms:
      handoff && !skipped ? ctx.clock.now() + handoffTtlMs(parsed.payload, ctx.opts.handoffTtlMs) : null,
  });
  attempt.count(skipped ? 'kv_skipped' : 'completed');
  sendRaw(attempt.res, 200, stringifyWithBigInt(result), { 'x-request-id': dispatch.engine_request_id });
}
