import type { IncomingMessage, ServerResponse } from 'node:http';
import { stringifyWithBigInt } from '../common/json-bigint.js';
import type { EngineRequest } from '../engine-adapters/index.js';
import type { MotorDispatch } from '../protocol/index.js';
import type { AttemptHandle } from './attempt-tracker.js';
import { contentTypeOf, sendRaw } from './engine-reply.js';
import { forwardableRequestHeaders, type EngineResponse } from './http-clients.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/** One attempt's leg on this engine: who asked, where to answer, and how to count the outcome. */
export interface LegAttempt {
  /** Its end-to-end headers go to the engine. */
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly handle: AttemptHandle;
  readonly dispatch: MotorDispatch;
  /** Counts an outcome: completed, rejected, stopped, upstream_error, engine_error. */
  readonly count: (outcome: string) => void;
}

/** What differs between leg kinds around the one failure ladder (a constant per leg kind). */
export interface EngineCallProfile {
  /** Named in the peer-stop reasons (`engine unreachable during …`, `engine answered 500 to …`). */
  readonly legName: string | null;
  /** A relayed engine error keeps the engine's content-type (else it is sent as application/json)… */
  readonly relayContentType: boolean;
  /** …and carries `x-request-id`. */
  readonly tagRequestId: boolean;
}

export interface EngineCall {
  path: string;
  built: EngineRequest;
  /** Aborted by a stop or a client disconnect (see `wireAbort`). */
  signal: AbortSignal;
}

/** An engine answer read whole. */
export interface WholeReply {
  status: number;
  text: string;
  contentType: Record<string, string>;
}

/*
 * The failure ladder, held here once for every leg. Whatever goes wrong, the client gets one answer:
 * - the attempt was stopped meanwhile        → count `stopped`, 409 `dispatch_stopped`;
 * - the engine is unreachable / broke off    → finish, count `upstream_error`, stop the peer leg, 502;
 * - the engine answered >= 400               → finish, count `engine_error`, stop the peer leg, relay it.
 */

/**
 * Sends a leg's request and hands back the engine's (status < 400) answer to stream; on any failure
 * it answers the client itself and returns null. The leg finishes the attempt after streaming.
 */
export async function callEngine(
  ctx: ProxyContext,
  attempt: LegAttempt,
  profile: EngineCallProfile,
  call: EngineCall,
): Promise<EngineResponse | null> {
  let up: EngineResponse;
  try {
    up = await send(ctx, attempt.req, call);
  } catch (err) {
    await engineFailed(ctx, attempt, profile, err);
    return null;
  }
  if (up.statusCode >= 400) {
    const text = await up.body.text().catch(() => '');
    await relayEngineError(ctx, attempt, profile, up.statusCode, text, contentTypeOf(up.headers));
    return null;
  }
  return up;
}

/**
 * `callEngine` for prefill-type legs: reads the whole answer (a body that breaks off counts as
 * unreachable), answers 409 when the attempt was stopped meanwhile, and finishes the attempt.
 */
export async function callEngineWhole(
  ctx: ProxyContext,
  attempt: LegAttempt,
  profile: EngineCallProfile,
  call: EngineCall,
): Promise<WholeReply | null> {
  let reply: WholeReply;
  try {
    const up = await send(ctx, attempt.req, call);
    reply = { status: up.statusCode, contentType: contentTypeOf(up.headers), text: await up.body.text() };
  } catch (err) {
    await engineFailed(ctx, attempt, profile, err);
    return null;
  }
  if (attempt.handle.stopReason !== null) {
    answerStopped(attempt);
    return null;
  }
  attempt.handle.finish('done');
  if (reply.status >= 400) {
    await relayEngineError(ctx, attempt, profile, reply.status, reply.text, reply.contentType);
    return null;
  }
  return reply;
}

/** Ends the attempt as done, counts `outcome`, stops the peer leg when `peerReason` is given, answers `err`. */
export async function refuseAttempt(
  ctx: ProxyContext,
  attempt: LegAttempt,
  outcome: string,
  err: ProxyError,
  peerReason: string | null,
): Promise<void> {
  attempt.handle.finish('done');
  attempt.count(outcome);
  if (peerReason !== null) await ctx.peerStopper.stopPeer(attempt.dispatch, peerReason);
  sendError(attempt.res, err);
}

/** Counts `stopped` and answers 409 `dispatch_stopped`, unless the answer has begun. */
export function answerStopped(attempt: LegAttempt): void {
  const { handle, res } = attempt;
  attempt.count('stopped');
  if (res.headersSent || res.destroyed) return;
  sendError(
    res,
    new ProxyError(
      'dispatch_stopped',
      `attempt ${handle.attemptSeq} of request ${handle.rootRequestId} was stopped (${handle.stopReason ?? 'other'})`,
    ),
  );
}

/**
 * Wires abort: a stop closes the upstream request (`ctl`) and makes the engine's extra abort call
 * (SGLang `/abort_request`); a client disconnect stops the attempt.
 */
export function wireAbort(
  ctx: ProxyContext,
  attempt: Pick<LegAttempt, 'res' | 'handle' | 'dispatch'>,
  ctl: AbortController = new AbortController(),
): AbortController {
  const { res, handle } = attempt;
  const engineRequestId = attempt.dispatch.engine_request_id;
  handle.onAbort((reason) => {
    ctl.abort(reason);
    return engineAbortCall(ctx, engineRequestId);
  });
  res.once('close', () => {
    if (!res.writableFinished) handle.finish('stopped', 'client_disconnect');
  });
  return ctl;
}

async function engineFailed(
  ctx: ProxyContext,
  attempt: LegAttempt,
  profile: EngineCallProfile,
  err: unknown,
): Promise<void> {
  if (attempt.handle.stopReason !== null) return answerStopped(attempt);
  const during = profile.legName === null ? '' : ` during ${profile.legName}`;
  await refuseAttempt(
    ctx,
    attempt,
    'upstream_error',
    ProxyError.engineUnreachable(err),
    `engine unreachable${during}`,
  );
}

async function relayEngineError(
  ctx: ProxyContext,
  attempt: LegAttempt,
  profile: EngineCallProfile,
  status: number,
  text: string,
  contentType: Record<string, string>,
): Promise<void> {
  const { dispatch } = attempt;
  attempt.handle.finish('done');
  attempt.count('engine_error');
  const to = profile.legName === null ? '' : ` to ${profile.legName}`;
  await ctx.peerStopper.stopPeer(dispatch, `engine answered ${status}${to}`);
  const headers = profile.relayContentType ? contentType : {};
  if (profile.tagRequestId) headers['x-request-id'] = dispatch.engine_request_id;
  sendRaw(attempt.res, status, text, headers);
}

function send(ctx: ProxyContext, req: IncomingMessage, call: EngineCall): Promise<EngineResponse> {
  return ctx.engine.request({
    method: 'POST',
    path: call.path,
    // The client's end-to-end headers plus the adapter's.
    headers: {
      ...forwardableRequestHeaders(req.headers),
      ...call.built.headers,
      'content-type': 'application/json',
    },
    body: stringifyWithBigInt(call.built.body),
    signal: call.signal,
  });
}

/** The adapter's extra abort call (SGLang `/abort_request`); vLLM needs only the closed connection. */
async function engineAbortCall(ctx: ProxyContext, engineRequestId: string): Promise<void> {
  const plan = ctx.adapter.abortPlan(engineRequestId);
  if (!plan.request) return;
  try {
    const up = await ctx.engine.request({
      method: plan.request.method,
      path: plan.request.path,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(plan.request.body),
      timeoutMs: ctx.opts.peerTimeoutMs,
      signal: AbortSignal.timeout(ctx.opts.peerTimeoutMs),
    });
    await up.body.dump();
  } catch (err) {
    ctx.log.warn({ err, request_id: engineRequestId }, 'engine abort call failed');
  }
}
