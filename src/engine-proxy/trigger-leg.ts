import type { IncomingMessage, ServerResponse } from 'node:http';
import { isPlainObject, sendJson } from '../common/http.js';
import { parseMetaserverKvFields, type MetaserverKvFields } from '../engine-adapters/index.js';
import { buildPrefillResult } from '../protocol/index.js';
import type { AttemptHandle } from './attempt-tracker.js';
import { sendRaw } from './engine-reply.js';
import type { Envelope } from './envelope.js';
import { LegAttempt, type EngineCallProfile } from './leg-attempt.js';
import type { PreparedPrefill, ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/** The trigger prefill relays the engine's answer (error or not) with its content-type and request id. */
const TRIGGER_PREFILL: EngineCallProfile = {
  legName: 'the trigger prefill',
  relayContentType: true,
  tagRequestId: true,
};

/**
 * Trigger flow, prefill side, step 1: cache the body and answer `prepared` at once. The decode
 * engine's metaserver call (step 2, `metaserverRoute`) runs the prefill.
 */
export function prepareTriggerLeg(
  ctx: ProxyContext,
  res: ServerResponse,
  env: Envelope,
  handle: AttemptHandle,
  path: string,
): void {
  const { dispatch } = env;
  const id = dispatch.engine_request_id;
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

/** `POST /v1/metaserver`: the decode engine sends its KV fields; run the prepared prefill with them. */
export async function metaserverRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const body = await ctx.bodies.json(req);
  const requestId = isPlainObject(body) && typeof body.request_id === 'string' ? body.request_id : null;
  if (requestId === null || requestId.length === 0) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'invalid' });
    const err = new ProxyError('invalid_request', 'request_id: required non-empty string', {
      param: 'request_id',
    });
    return sendError(res, err);
  }
  const fields = parseMetaserverKvFields(body);
  if (!fields.ok) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'invalid' });
    const entry = ctx.prepared.take(requestId);
    if (entry) {
      entry.handle.finish('stopped', 'metaserver_invalid');
      await ctx.peerStopper.stopPeer(
        entry.dispatch,
        `metaserver call with invalid KV fields: ${fields.message}`,
      );
    }
    const message = `invalid metaserver KV fields: ${fields.message}`;
    return sendError(res, new ProxyError('invalid_request', message, { param: fields.param }));
  }
  const ctl = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) ctl.abort('metaserver caller went away');
  });
  const entry = await takePrepared(ctx, requestId, ctl.signal);
  if (!entry) {
    ctx.metrics.metaserverCalls.inc({ outcome: 'not_found' });
    if (ctl.signal.aborted) return;
    const message =
      `no prepared prefill for request_id ${requestId} within ${ctx.opts.metaserverWaitMs} ms ` +
      '(unknown, expired, stopped, or already consumed)';
    return sendError(res, new ProxyError('not_found', message, { param: 'request_id' }));
  }
  const attempt = new LegAttempt(ctx, req, res, entry.handle, entry.dispatch, 'trigger_prefill');
  return runTriggerPrefill(ctx, attempt, entry, fields, ctl);
}

/** The prepared prefill now, or after waiting for a late prepare (bounded); the wait is measured. */
async function takePrepared(
  ctx: ProxyContext,
  requestId: string,
  signal: AbortSignal,
): Promise<PreparedPrefill | undefined> {
  const started = performance.now();
  const immediate = ctx.prepared.take(requestId);
  const entry = immediate ?? (await ctx.prepared.takeOrWait(requestId, ctx.opts.metaserverWaitMs, signal));
  const waitOutcome = immediate ? 'immediate' : entry ? 'after_wait' : 'not_found';
  ctx.metrics.metaserverWait.observe({ outcome: waitOutcome }, (performance.now() - started) / 1000);
  return entry;
}

/** Trigger flow, step 2: the real prefill, pushing KV into the decode's blocks; relays the engine's answer. */
async function runTriggerPrefill(
  ctx: ProxyContext,
  attempt: LegAttempt,
  entry: PreparedPrefill,
  kv: { value: MetaserverKvFields; extra: Record<string, unknown> },
  ctl: AbortController,
): Promise<void> {
  const { dispatch } = entry;
  const built = ctx.adapter.buildEngineRequest('trigger_prefill', {
    body: entry.body,
    dispatch,
    triggerKv: kv.value,
  });
  if (!built.ok) return attempt.refuse('rejected', ProxyError.fromAdapter(built), null);
  // Extra keys the decode's connector sent ride along; the adapter's win on conflict.
  built.body.kv_transfer_params = {
    ...kv.extra,
    ...(built.body.kv_transfer_params as Record<string, unknown>),
  };
  attempt.wireAbort(ctl);
  const reply = await attempt.callEngineWhole(TRIGGER_PREFILL, entry.path, built, ctl.signal);
  if (reply === null) return;
  attempt.count('completed');
  sendRaw(attempt.res, reply.status, reply.text, {
    ...reply.contentType,
    'x-request-id': dispatch.engine_request_id,
  });
}
