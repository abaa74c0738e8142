import type { IncomingMessage, ServerResponse } from 'node:http';
import { stringifyWithBigInt } from '../common/json-bigint.js';
import { spliceJson, type JsonSource } from '../common/json-splice.js';
import { bodyLength } from '../common/request-body.js';
import type { EngineRequest, LegKind } from '../engine-adapters/index.js';
import type { MotorDispatch } from '../protocol/index.js';
import type { AttemptHandle } from './attempt-tracker.js';
import { contentTypeOf, sendRaw } from './engine-reply.js';
import { forwardableRequestHeaders, type EngineResponse } from './http-clients.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/** What differs between leg kinds around the one failure ladder (a constant per leg kind). */
export interface EngineCallProfile {
  /** Named in the peer-stop reasons (`engine unreachable during …`, `engine answered 500 to …`). */
  readonly legName: string | null;
  /** A relayed engine error keeps the engine's content-type (else it is sent as application/json)… */
  readonly relayContentType: boolean;
  /** …and carries `x-request-id`. */
  readonly tagRequestId: boolean;
  /** Answer a relayed engine error with this status instead of the engine's (the trigger prefill: 502). */
  readonly engineErrorStatus?: number;
}

/** An engine answer read whole. */
export interface WholeReply {
  status: number;
  text: string;
  contentType: Record<string, string>;
}

/**
 * One attempt's leg on this engine, and the one engine call with its failure ladder. Whatever goes
 * wrong, the client gets exactly one answer:
 * - the attempt was stopped meanwhile     → count `stopped`, 409 `dispatch_stopped`;
 * - the engine is unreachable / broke off → finish, count `upstream_error`, stop the peer leg, 502;
 * - the engine answered >= 400            → finish, count `engine_error`, stop the peer leg, relay it.
 */
export class LegAttempt {
  /** Length of the body sent to the engine (bytes when spliced, else characters), for the upload-refusal rule. */
  private sentChars = 0;

  constructor(
    private readonly ctx: ProxyContext,
    /** Its end-to-end headers go to the engine. */
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly handle: AttemptHandle,
    readonly dispatch: MotorDispatch,
    readonly leg: LegKind,
    /** The envelope's bytes the engine body is spliced from; null: serialised whole. */
    private readonly source: JsonSource | null = null,
  ) {}

  /** Counts an outcome: completed, rejected, stopped, upstream_error, engine_error. */
  count(outcome: string): void {
    const { metrics } = this.ctx;
    // A trigger prefill runs as the answer to a metaserver call: it counts as one too.
    if (this.leg === 'trigger_prefill') metrics.metaserverCalls.inc({ outcome });
    metrics.dispatches.inc({ role: this.dispatch.role, leg: this.leg, outcome });
  }

  /**
   * Sends the leg's request and hands back the engine's (status < 400) answer to stream; on any
   * failure it answers the client itself and returns null. The leg finishes the attempt after streaming.
   */
  async callEngine(
    profile: EngineCallProfile,
    path: string,
    built: EngineRequest,
    signal: AbortSignal,
  ): Promise<EngineResponse | null> {
    let up: EngineResponse;
    try {
      up = await this.send(path, built, signal);
    } catch (err) {
      await this.engineFailed(profile, err);
      return null;
    }
    if (up.statusCode >= 400) {
      const text = await up.body.text().catch(() => '');
      await this.relayEngineError(profile, up.statusCode, text, contentTypeOf(up.headers));
      return null;
    }
    return up;
  }

  /**
   * `callEngine` for prefill-type legs: reads the whole answer (a body that breaks off counts as
   * unreachable), answers 409 when the attempt was stopped meanwhile, and finishes the attempt.
   */
  async callEngineWhole(
    profile: EngineCallProfile,
    path: string,
    built: EngineRequest,
    signal: AbortSignal,
  ): Promise<WholeReply | null> {
    let reply: WholeReply;
    try {
      const up = await this.send(path, built, signal);
      reply = { status: up.statusCode, contentType: contentTypeOf(up.headers), text: await up.body.text() };
    } catch (err) {
      await this.engineFailed(profile, err);
      return null;
    }
    if (this.handle.stopReason !== null) {
      this.answerStopped();
      return null;
    }
    this.handle.finish('done');
    if (reply.status >= 400) {
      await this.relayEngineError(profile, reply.status, reply.text, reply.contentType);
      return null;
    }
    return reply;
  }

  /** Ends the attempt as done, counts `outcome`, stops the peer leg when `peerReason` is given, answers `err`. */
  async refuse(outcome: string, err: ProxyError, peerReason: string | null): Promise<void> {
    this.handle.finish('done');
    this.count(outcome);
    if (peerReason !== null) await this.stopPeer(peerReason);
    sendError(this.res, err);
  }

  /** Counts `stopped` and answers 409 `dispatch_stopped`, unless the answer has begun. */
  answerStopped(): void {
    const { handle, res } = this;
    this.count('stopped');
    if (res.headersSent || res.destroyed) return;
    const message = `attempt ${handle.attemptSeq} of request ${handle.rootRequestId} was stopped (${handle.stopReason ?? 'other'})`;
    sendError(res, new ProxyError('dispatch_stopped', message));
  }

  /** Tells the peer leg to stop (`peer_failed`): this leg failed on its own. */
  stopPeer(why: string): Promise<void> {
    return this.ctx.peerStopper.stopPeer(this.dispatch, why);
  }

  /**
   * Wires abort: a stop aborts `ctl` (closing the upstream request) and makes the engine's extra
   * abort call (SGLang `/abort_request`); a client disconnect stops the attempt.
   */
  wireAbort(ctl: AbortController = new AbortController()): AbortController {
    const { res, handle } = this;
    handle.onAbort((reason) => {
      ctl.abort(reason);
      return this.engineAbortCall();
    });
    res.once('close', () => {
      if (!res.writableFinished) handle.finish('stopped', 'client_disconnect');
    });
    return ctl;
  }

  private async engineFailed(profile: EngineCallProfile, err: unknown): Promise<void> {
    if (this.handle.stopReason !== null) return this.answerStopped();
    const during = profile.legName === null ? '' : ` during ${profile.legName}`;
    const refusal = ProxyError.engineUnreachable(err, this.sentChars);
    // a large upload the engine cut is the request's: relayed as 413, counted like an engine refusal
    if (refusal.code === 'body_too_large')
      return this.refuse('engine_error', refusal, `engine refused the body${during}`);
    await this.refuse('upstream_error', refusal, `engine unreachable${during}`);
  }

  private async relayEngineError(
    profile: EngineCallProfile,
    status: number,
    text: string,
    contentType: Record<string, string>,
  ): Promise<void> {
    this.handle.finish('done');
    this.count('engine_error');
    const to = profile.legName === null ? '' : ` to ${profile.legName}`;
    await this.stopPeer(`engine answered ${status}${to}`);
    const headers = profile.relayContentType ? contentType : {};
    if (profile.tagRequestId) headers['x-request-id'] = this.dispatch.engine_request_id;
    sendRaw(this.res, profile.engineErrorStatus ?? status, text, headers);
  }

  private send(path: string, built: EngineRequest, signal: AbortSignal): Promise<EngineResponse> {
    // The members the adapter kept are copied from the envelope's bytes (views, no re-serialisation
    // of the prompt); the ones it added or changed, and the Motor fields it dropped, are not.
    const body = this.source ? spliceJson(this.source, built.body) : stringifyWithBigInt(built.body);
    this.sentChars = bodyLength(body);
    return this.ctx.engine.request({
      method: 'POST',
      path,
      // The client's end-to-end headers plus the adapter's.
      headers: {
        ...forwardableRequestHeaders(this.req.headers),
        ...built.headers,
        'content-type': 'application/json',
      },
      body,
      signal,
    });
  }

  /** The adapter's extra abort call (SGLang `/abort_request`); vLLM needs only the closed connection. */
  private async engineAbortCall(): Promise<void> {
    const { ctx } = this;
    const engineRequestId = this.dispatch.engine_request_id;
    const plan = ctx.adapter.abortPlan(engineRequestId);
    if (!plan.request) return;
    try {
      const up = await ctx.engine.request({
        method: plan.request.method,
        path: plan.request.path,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(plan.request.body),
        // SGLang's /abort_request is ADMIN_OPTIONAL (engine-credentials.ts).
        admin: true,
        timeoutMs: ctx.opts.peerTimeoutMs,
        signal: AbortSignal.timeout(ctx.opts.peerTimeoutMs),
      });
      await up.body.dump();
    } catch (err) {
      ctx.log.warn({ err, request_id: engineRequestId }, 'engine abort call failed');
    }
  }
}
