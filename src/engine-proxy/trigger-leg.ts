import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import {
  engineRequestIdCandidates,
  findByCandidates,
  metaserverRequestId,
  parseMetaserverKvFields,
  requestIdForm,
  type MetaserverKvFields,
} from '../engine-adapters/index.js';
import { buildPrefillResult } from '../protocol/index.js';
import type { AttemptHandle } from './attempt-tracker.js';
import { sendRaw } from './engine-reply.js';
import type { Envelope } from './envelope.js';
import { LegAttempt, type EngineCallProfile } from './leg-attempt.js';
import type { PreparedPrefill, ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/**
 * A failed trigger prefill answers 502 like the newest layer-wise proxy (the engine's body and
 * content-type relayed), tagged with the request id.
 */
const TRIGGER_PREFILL: EngineCallProfile = {
  legName: 'the trigger prefill',
  relayContentType: true,
  tagRequestId: true,
  engineErrorStatus: 502,
};

/**
 * Trigger flow, prefill side, step 1: cache the body and answer `prepared` at once. The decode
 * engine's metaserver call (step 2, `metaserverRoute`) runs the prefill.
 */
export async function prepareTriggerLeg(
  ctx: ProxyContext,
  res: ServerResponse,
  env: Envelope,
  handle: AttemptHandle,
  path: string,
): Promise<void> {
  const { dispatch } = env;
  const id = dispatch.engine_request_id;
  if (ctx.unservedMetaserver.take(id)) return refuseUnserved(ctx, res, env, handle);
  const expiresAt = ctx.prepared.put(id, { dispatch, body: env.body, path, handle });
  if (expiresAt === null) {
    handle.finish('stopped', 'prepared_store_full');
    ctx.metrics.dispatches.inc({ role: 'prefill', leg: env.leg, outcome: 'refused' });
    const message = `too many prepared prefills waiting (${ctx.opts.maxPrepared})`;
    return sendError(res, new ProxyError('prepared_store_full', message));
  }
  handle.onAbort(() => void ctx.prepared.delete(id));
  ctx.metrics.dispatches.inc({ role: 'prefill', leg: env.leg, outcome: 'prepared' });
  const result = buildPrefillResult({
    root_request_id: dispatch.root_request_id,
    engine_request_id: id,
    pair_id: dispatch.pair_id,
    attempt_seq: dispatch.attempt_seq,
    status: 'prepared',
    handoff_mode: 'trigger',
    expires_at_ms: expiresAt,
  });
  sendJson(res, 200, result, { 'x-request-id': id });
}

/**
 * The decode engine's metaserver call for this prefill came first and was answered without a prefill
 * (its bounded wait ran out, or its body was invalid); the connector ignores that answer and waits
 * for KV, so the prefill is refused (409 `dispatch_stopped`) and the decode peer stopped: the
 * coordinator retries the attempt instead of waiting for its first-token timeout.
 */
async function refuseUnserved(
  ctx: ProxyContext,
  res: ServerResponse,
  env: Envelope,
  handle: AttemptHandle,
): Promise<void> {
  handle.finish('stopped', 'metaserver_unserved');
  ctx.metrics.dispatches.inc({ role: 'prefill', leg: env.leg, outcome: 'stopped' });
  const why = 'its metaserver call came before the prefill and was not served';
  await ctx.peerStopper.stopPeer(env.dispatch, why);
  sendError(
    res,
    new ProxyError('dispatch_stopped', `trigger prefill ${env.dispatch.engine_request_id}: ${why}`),
  );
}

/** Remembers an unserved metaserver call under every candidate id (see `refuseUnserved`). */
function rememberUnserved(ctx: ProxyContext, candidates: readonly string[]): void {
  for (const id of candidates) ctx.unservedMetaserver.put(id, true);
}

/**
 * The newest layer-wise proxy's success answer, sent once the prefill finished (vllm-project/vllm-ascend
 * `load_balance_proxy_layerwise_server_example.py`, `metaserver`, main 2026-08-22; fixture
 * `vllm-ascend/layerwise-v0.17/metaserver-response.ok.json`). The connector ignores it.
 */
export const METASERVER_OK = '{"status":"ok"}';

/**
 * `POST /v1/metaserver`: the decode engine sends its KV fields; run the prepared prefill with them.
 * The connector ignores this answer's status (`_access_metaserver`, vllm-ascend
 * `mooncake_layerwise_connector.py`, every tag): whenever the prefill cannot run, this side stops the
 * decode peer itself (when it can tell which attempt it is), else the decode waits for KV until
 * the coordinator's first-token timeout. `attemptId`: the engine request id a verified per-attempt
 * metaserver URL names (metaserver-url.ts), whose prefill alone this call may run; null on the
 * untokened `/v1/metaserver` (no peer secret configured).
 */
export async function metaserverRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  attemptId: string | null,
): Promise<void> {
  const body = await ctx.bodies.json(req);
  const requestId = metaserverRequestId(body);
  if (requestId === null) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'invalid' });
    const err = new ProxyError('invalid_request', 'request_id: required non-empty string', {
      param: 'request_id',
    });
    return sendError(res, err);
  }
  // vLLM's external id (`chatcmpl-<id>`, `cmpl-<id>-<i>`, maybe `-<8 hex>`): try each exact form.
  const forms = engineRequestIdCandidates(requestId);
  if (attemptId !== null && !forms.includes(attemptId)) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'invalid' });
    const message = 'request_id: not the attempt this metaserver URL was given for';
    return sendError(res, new ProxyError('invalid_request', message, { param: 'request_id' }));
  }
  const candidates = attemptId !== null ? [attemptId] : forms;
  const fields = parseMetaserverKvFields(body);
  if (!fields.ok) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'invalid' });
    const entry = findByCandidates(candidates, (id) => ctx.prepared.take(id))?.value;
    if (entry) {
      entry.handle.finish('stopped', 'metaserver_invalid');
      await ctx.peerStopper.stopPeer(
        entry.dispatch,
        `metaserver call with invalid KV fields: ${fields.message}`,
      );
    } else rememberUnserved(ctx, candidates);
    const message = `invalid metaserver KV fields: ${fields.message}`;
    return sendError(res, new ProxyError('invalid_request', message, { param: fields.param }));
  }
  const ctl = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) ctl.abort('metaserver caller went away');
  });
  const entry = await takePrepared(ctx, candidates, ctl.signal);
  if (!entry) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'not_found' });
    // A caller that went away is retried by the connector (it retries on exceptions).
    if (ctl.signal.aborted) return;
    rememberUnserved(ctx, candidates);
    const message =
      `no prepared prefill for request_id ${requestId} within ${ctx.opts.metaserverWaitMs} ms ` +
      '(unknown, expired, stopped, or already consumed)';
    return sendError(res, new ProxyError('not_found', message, { param: 'request_id' }));
  }
  const form = requestIdForm(requestId, entry.dispatch.engine_request_id);
  ctx.metrics.metaserverIdForms.inc({ form });
  const attempt = new LegAttempt(ctx, req, res, entry.handle, entry.dispatch, 'trigger_prefill');
  return runTriggerPrefill(ctx, attempt, entry, fields.value, ctl);
}

/** The prepared prefill now, or after waiting for a late prepare (bounded); the wait is measured. */
async function takePrepared(
  ctx: ProxyContext,
  candidates: readonly string[],
  signal: AbortSignal,
): Promise<PreparedPrefill | undefined> {
  const started = performance.now();
  const immediate = findByCandidates(candidates, (id) => ctx.prepared.take(id))?.value;
  const entry = immediate ?? (await ctx.prepared.takeOrWait(candidates, ctx.opts.metaserverWaitMs, signal));
  const waitOutcome = immediate ? 'immediate' : entry ? 'after_wait' : 'not_found';
  ctx.metrics.metaserverWait.observe({ outcome: waitOutcome }, (performance.now() - started) / 1000);
  return entry;
}

/**
 * Trigger flow, step 2: the real prefill, pushing KV into the decode's blocks. Answers like the
 * newest layer-wise proxy: 200 `{"status":"ok"}` once it finished, 502 when it failed (the failure
 * also stops the decode peer, see `LegAttempt`).
 */
async function runTriggerPrefill(
  ctx: ProxyContext,
  attempt: LegAttempt,
  entry: PreparedPrefill,
  kv: MetaserverKvFields,
  ctl: AbortController,
): Promise<void> {
  const { dispatch } = entry;
  const built = ctx.adapter.buildEngineRequest('trigger_prefill', {
    body: entry.body,
    dispatch,
    triggerKv: kv,
  });
  if (!built.ok) {
    const why = `trigger prefill refused: ${built.message}`;
    return attempt.refuse('rejected', ProxyError.fromAdapter(built), why);
  }
  attempt.wireAbort(ctl);
  const reply = await attempt.callEngineWhole(TRIGGER_PREFILL, entry.path, built, ctl.signal);
  if (reply === null) return;
  attempt.count('completed');
  sendRaw(attempt.res, 200, METASERVER_OK, { 'x-request-id': dispatch.engine_request_id });
}
