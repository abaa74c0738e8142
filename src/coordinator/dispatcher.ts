import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Dispatcher as UndiciDispatcher } from 'undici';
import type { Logger } from '../common/logger.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import {
  noopDispatchObserver,
  noopLegObserver,
  noopRequestObserver,
  routeSummary,
  stopResultOf,
  type DispatchObserver,
  type LegObserver,
  type RequestObserver,
} from '../observability/dispatch-observer.js';
import { engineAdapterFor } from '../engine-adapters/index.js';
import { isPlainObject } from '../common/http.js';
import {
  buildDispatchStopRequest,
  buildPrefillResult,
  MOTOR_PREFILL_RESULT_KEY,
  matchesDispatch,
  parsePrefillResult,
  PREFILL_RESULT_OBJECT,
  type DispatchStopReason,
  type PrefillResult,
} from '../protocol/index.js';
import { backoffDelayMs } from './backoff.js';
import { ClientSink } from './client-sink.js';
import type { Instance, InstanceSource } from './instance-source.js';
import {
  bootstrapAddressOf,
  buildLegRequest,
  dispatchFor,
  prefillShapedBody,
  type AttemptIds,
  type LegRole,
} from './leg-request.js';
import { errorForEngineStatus, MotorError } from './motor-error.js';
import type { ClientRequest } from './request-validation.js';
import type { Route } from './route-selection.js';
import type { LegTracking, SchedulingAdapter } from './scheduling-adapter.js';
import type { SchedulingRequest } from '../scheduling/index.js';
import {
  needsRewrite,
  rewriteResponseObject,
  SseRelay,
  withoutTrailingNullKv,
  type ResponseRewrite,
} from './sse-relay.js';
import type { TriggerRegistry } from './trigger-registry.js';
import { readAll, UpstreamAbort, type Upstreams } from './upstream.js';

export interface DispatcherDeps {
  config: CoordinatorConfig;
  source: InstanceSource;
  /** Pair selection, load tracking, circuit breakers (the scheduling library). */
  scheduling: SchedulingAdapter;
  upstreams: Upstreams;
  triggers: TriggerRegistry;
  log: Logger;
  /** Metrics, tracing, access log, dashboard (default: none). */
  observer?: DispatchObserver;
  /** Base URL engines use to reach this coordinator (direct trigger metaserver). */
  publicUrl: () => string;
}

type ResponseData = UndiciDispatcher.ResponseData;

/** One engine request of an attempt. */
class Leg {
  readonly ctl = new UpstreamAbort();
  obs: LegObserver = noopLegObserver;
  response: Promise<ResponseData> | null = null;
  /** Load tracking and circuit-breaker outcome of this leg. */
  tracking: LegTracking | null = null;
  private released = false;

  constructor(
    readonly instance: Instance,
    readonly role: LegRole,
    /** The instance source's claim (registry in-flight count, drain); released with the leg. */
    private readonly claim: (() => void) | undefined,
  ) {
    instance.inFlight++;
  }

  /** `err`: the failure the leg ended with (null/absent = success), for the scheduler's outcome. */
  release(err: MotorError | null = null): void {
    if (this.released) return;
    this.released = true;
    this.instance.inFlight--;
    this.tracking?.end(err);
    this.claim?.();
  }
}

/** Everything about one client request: the client side, the deadline, the current attempt. */
class Session {
  attempt: Attempt | null = null;
  /** Built once per client request (rendered prompt) by `serve`. */
  schedulingRequest!: SchedulingRequest;
  obs: RequestObserver = noopRequestObserver;
  gone = false;
  deadlineHit = false;
  private deadline: NodeJS.Timeout | null = null;
  readonly rewrite: ResponseRewrite;

  constructor(
    readonly rootRequestId: string,
    readonly client: ClientRequest,
    readonly path: string,
    readonly sink: ClientSink,
    totalMs: number,
  ) {
    this.rewrite = { cachedTokens: null, stripTokenIds: !client.wantsTokenIds };
    sink.onGone = () => {
      this.gone = true;
      this.attempt?.fail(new MotorError('client_disconnect', 'the client went away'), 'client_disconnect');
    };
    if (totalMs > 0) {
      this.deadline = setTimeout(() => {
        this.deadlineHit = true;
        this.attempt?.fail(
          new MotorError('deadline_exceeded', `request exceeded its ${totalMs} ms deadline`),
          'timeout',
        );
      }, totalMs);
    }
  }

  get stopped(): boolean {
    return this.gone || this.deadlineHit;
  }

  close(): void {
    if (this.deadline) clearTimeout(this.deadline);
  }
}

/** One attempt: a route, fresh ids, its legs, and the one place failures stop both legs. */
class Attempt {
  readonly ids: AttemptIds;
  readonly legs: Leg[] = [];
  failure: MotorError | null = null;
  /** The prefill leg failed (for the prefill-failure policy). */
  prefillFailed = false;
  /** From the scheduling decision: prompt tokens expected cached on the prefill side; instances picked. */
  cachedPromptTokens = 0;
  picked: readonly Instance[] = [];
  private watchdog: NodeJS.Timeout | null = null;
  private idleMs = 0;
  private readonly failListeners: Array<(err: MotorError) => void> = [];

  constructor(
    private readonly d: Dispatcher,
    readonly session: Session,
    readonly route: Route,
    seq: number,
  ) {
    this.ids = {
      rootRequestId: session.rootRequestId,
      engineRequestId: `${session.rootRequestId}#a${seq}`,
      pairId: randomUUID(),
      attemptSeq: seq,
    };
    const { firstTokenMs, idleMs } = d.deps.config.timeouts;
    this.idleMs = idleMs;
    // Non-stream responses arrive whole: the watchdog then covers the prefill leg only (none for single).
    if (firstTokenMs > 0 && (session.client.stream || route.kind === 'pd')) {
      this.watchdog = setTimeout(
        () =>
          this.fail(
            new MotorError(
              'first_token_timeout',
              `no first token within ${firstTokenMs} ms (attempt ${seq})`,
            ),
            'timeout',
          ),
        firstTokenMs,
      );
    }
  }

  /** Starts a leg's HTTP request; the promise resolves with the response headers. */
  open(instance: Instance, role: LegRole, body: string, headers: Record<string, string>): Leg {
    const { source } = this.d.deps;
    const claim = source.acquire ? source.acquire(instance) : () => {};
    const leg = new Leg(instance, role, claim);
    this.legs.push(leg);
    leg.tracking = this.d.deps.scheduling.beginLeg(
      instance,
      role,
      this.session.schedulingRequest,
      this.cachedPromptTokens,
    );
    leg.obs = this.session.obs.legStart(role, instance.id, headers);
    if (claim === undefined) {
      // Drained or paused since the route was picked: no new work; a retry picks another instance.
      leg.response = Promise.reject(
        new MotorError('instance_withdrawn', `instance ${instance.id} no longer takes new work`, {
          instanceId: instance.id,
        }),
      );
    } else {
      leg.response = this.d.deps.upstreams.request(instance, {
        path: this.session.path,
        body,
        headers,
        signal: leg.ctl,
      });
      leg.response.then(
        () => source.reportSuccess?.(instance),
        (err: unknown) => {
          if (!leg.ctl.aborted) source.reportFailure?.(instance, (err as Error).message);
        },
      );
    }
    leg.response.catch(() => {}); // observed by whoever awaits it; never an unhandled rejection
    if (this.failure) leg.ctl.abort();
    return leg;
  }

  onFail(listener: (err: MotorError) => void): void {
    this.failListeners.push(listener);
  }

  /** First byte reached the client: the first-token watchdog becomes the idle watchdog. */
  committed(): void {
    this.session.obs.committed();
    for (const leg of this.legs) leg.tracking?.firstToken();
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
    if (this.idleMs > 0) {
      this.watchdog = setTimeout(
        () => this.fail(new MotorError('idle_timeout', `no stream data for ${this.idleMs} ms`), 'timeout'),
        this.idleMs,
      );
    }
  }

  /** Non-stream: the prefill leg is done, the rest is bounded by the overall deadline. */
  prefillDone(): void {
    if (this.session.client.stream || this.watchdog === null) return;
    clearTimeout(this.watchdog);
    this.watchdog = null;
  }

  /** A stream chunk arrived: re-arm the idle watchdog (no allocation). */
  touch(): void {
    this.watchdog?.refresh();
  }

  /**
   * Fails the attempt once: aborts every open leg (closing its socket) and sends
   * `POST /v1/dispatch/stop` to both instances of the route (proxy mode) or the engine's abort call
   * (direct mode). Later calls are no-ops.
   */
  fail(err: MotorError, reason: DispatchStopReason): void {
    if (this.failure) return;
    this.failure = err;
    this.session.obs.attemptFailed(err.code, reason);
    this.clearTimers();
    for (const leg of this.legs) leg.ctl.abort();
    this.d.stopLegs(this, reason);
    for (const l of this.failListeners) l(err);
  }

  /** Ends the attempt's bookkeeping (legs released, timers cleared). */
  finish(): void {
    this.clearTimers();
    for (const leg of this.legs) leg.obs.end(this.failure?.code ?? null);
    for (const leg of this.legs) leg.release(this.failure);
    for (const instance of this.picked)
      if (!this.legs.some((leg) => leg.instance === instance)) this.d.deps.scheduling.unused(instance);
    this.d.deps.triggers.remove(this.ids.engineRequestId);
  }

  private clearTimers(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
  }
}

const sleep = (ms: number, session: Session): Promise<void> =>
  new Promise((resolve) => {
    if (ms <= 0) return resolve();
    const t = setTimeout(resolve, ms);
    const check = setInterval(() => {
      if (session.stopped) {
        clearTimeout(t);
        clearInterval(check);
        resolve();
      }
    }, 20);
    setTimeout(() => clearInterval(check), ms + 1).unref();
  });

/**
 * Runs client requests as attempts over P/D pairs (DESIGN.md §2–3): plan selection, the handoff /
 * trigger / bootstrap / single flows, the commit barrier and stream relay, stops, retries.
 */
export class Dispatcher {
  constructor(readonly deps: DispatcherDeps) {}

  async serve(
    client: ClientRequest,
    rootRequestId: string,
    path: string,
    res: ServerResponse,
    /** Session affinity key (`x-session-id`) and API key (rate limiting) of the client request. */
    meta: { sessionKey?: string; apiKey?: string } = {},
  ): Promise<void> {
    const { config } = this.deps;
    const sink = new ClientSink(res, rootRequestId, client.stream);
    const session = new Session(rootRequestId, client, path, sink, config.timeouts.totalMs);
    session.obs = (this.deps.observer ?? noopDispatchObserver).requestStart({
      rootRequestId,
      path,
      model: client.model,
      stream: client.stream,
      headers: res.req.headers,
    });
    session.schedulingRequest = this.deps.scheduling.requestFor(client, meta);
    const exclude = new Set<string>();
    let lastError: MotorError | null = null;
    let forced: Route | null = null;
    try {
      for (let seq = 1; seq <= config.retry.maxAttempts; seq++) {
        if (seq > 1) await sleep(backoffDelayMs(seq, config.retry), session);
        if (session.stopped) break;
        let route: Route;
        let selection = null;
        try {
          selection = forced
            ? null
            : this.deps.scheduling.select(this.deps.source.routable(), session.schedulingRequest, exclude);
          route = forced ?? selection!.route;
        } catch (err) {
          lastError = err instanceof MotorError ? err : new MotorError('internal', String(err));
          break;
        }
        const attempt = new Attempt(this, session, route, seq);
        if (selection) {
          attempt.cachedPromptTokens = selection.cachedPromptTokens;
          attempt.picked = selection.picked;
        }
        session.attempt = attempt;
        session.obs.attempt(seq, routeSummary(route));
        let outcome: MotorError | null;
        try {
          outcome = await this.runAttempt(attempt);
        } catch (err) {
          outcome = err instanceof MotorError ? err : new MotorError('internal', (err as Error).message);
          attempt.fail(outcome, 'other');
        } finally {
          attempt.finish();
          session.attempt = null;
        }
        if (outcome === null) return;
        lastError = outcome;
        if (sink.committed || session.stopped || !outcome.retryable) break;
        this.deps.log.warn(
          { root_request_id: rootRequestId, attempt_seq: seq, code: outcome.code, err: outcome.message },
          'attempt failed before the first byte; retrying',
        );
        session.obs.retry(seq, outcome.code);
        if (outcome.instanceId) exclude.add(outcome.instanceId);
        if (attempt.prefillFailed && route.kind === 'pd') {
          const policy = config.dispatch.prefillFailurePolicy;
          if (policy === 'error') break;
          if (policy === 'fallback-decode-only')
            forced = { kind: 'single', instance: route.decode, degraded: true };
        }
      }
      if (session.deadlineHit && lastError?.code !== 'deadline_exceeded') {
        lastError = new MotorError(
          'deadline_exceeded',
          `request exceeded its ${config.timeouts.totalMs} ms deadline`,
        );
      }
      if (!session.gone) sink.fail(lastError ?? new MotorError('internal', 'no attempt was made'));
    } finally {
      session.close();
      session.obs.end(res.statusCode, lastError?.code ?? null);
    }
  }

  /** Runs one attempt; null = the response was delivered (or ended after commit), else the failure. */
  private async runAttempt(attempt: Attempt): Promise<MotorError | null> {
    const { route } = attempt;
    if (route.kind === 'single') return this.runSingle(attempt, route.instance);
    if (route.flow === 'handoff') return this.runHandoff(attempt, route);
    return this.runConcurrent(attempt, route);
  }

  private async runSingle(attempt: Attempt, instance: Instance): Promise<MotorError | null> {
    const dispatch = dispatchFor(attempt.ids, 'single', attempt.route);
    const req = buildLegRequest(instance, { body: attempt.session.client.body, dispatch });
    const leg = attempt.open(instance, 'single', req.body, req.headers);
    return this.relayDecode(attempt, leg, null);
  }

  private async runHandoff(
    attempt: Attempt,
    route: Extract<Route, { kind: 'pd' }>,
  ): Promise<MotorError | null> {
    const { session } = attempt;
    const prefillDispatch = dispatchFor(attempt.ids, 'prefill', route);
    const preq = buildLegRequest(route.prefill, {
      body: prefillShapedBody(session.client.body),
      dispatch: prefillDispatch,
    });
    const pleg = attempt.open(route.prefill, 'prefill', preq.body, preq.headers);
    const prefill = await this.awaitPrefill(attempt, pleg, 'handoff');
    pleg.obs.end(prefill instanceof MotorError ? prefill.code : null);
    pleg.release(prefill instanceof MotorError ? prefill : null);
    if (prefill instanceof MotorError) return prefill;
    attempt.prefillDone();
    session.rewrite.cachedTokens = cachedTokensOf(prefill.usage);
    const decodeDispatch = dispatchFor(attempt.ids, 'decode', route);
    const dreq = buildLegRequest(route.decode, {
      body: session.client.body,
      dispatch: decodeDispatch,
      prefillResult: prefill,
    });
    const dleg = attempt.open(route.decode, 'decode', dreq.body, dreq.headers);
    return this.relayDecode(attempt, dleg, null);
  }

  /** Trigger and bootstrap: both legs at once. */
  private async runConcurrent(
    attempt: Attempt,
    route: Extract<Route, { kind: 'pd' }>,
  ): Promise<MotorError | null> {
    const { session } = attempt;
    const flow = route.flow as 'trigger' | 'bootstrap';
    const prefillBody = prefillShapedBody(session.client.body);
    const prefillDispatch = dispatchFor(attempt.ids, 'prefill', route);
    const decodeDispatch = dispatchFor(attempt.ids, 'decode', route);
    const directTrigger = flow === 'trigger' && route.prefill.mode === 'direct';
    const bootstrap = flow === 'bootstrap' ? bootstrapAddressOf(route.prefill) : null;

    let prefillDone: Promise<PrefillResult | MotorError>;
    if (directTrigger) {
      // A stock vLLM prefill has no metaserver: the coordinator serves it and runs the prefill when
      // the decode engine's connector calls with its KV fields.
      prefillDone = new Promise((resolve) => {
        this.deps.triggers.register(attempt.ids.engineRequestId, {
          fail: (err) => attempt.fail(err, 'peer_failed'),
          run: async (fields) => {
            const req = buildLegRequest(route.prefill, {
              body: prefillBody,
              dispatch: prefillDispatch,
              triggerKv: fields,
            });
            const leg = attempt.open(route.prefill, 'prefill', req.body, req.headers);
            const result = await this.awaitPrefill(attempt, leg, 'trigger');
            leg.obs.end(result instanceof MotorError ? result.code : null);
            leg.release(result instanceof MotorError ? result : null);
            resolve(result);
            if (result instanceof MotorError) {
              return { status: result.reply?.status ?? 502, body: { error: { message: result.message } } };
            }
            return { status: 200, body: { status: 'ok', request_id: fields.request_id } };
          },
        });
        attempt.onFail((err) => resolve(err));
      });
    } else {
      const preq = buildLegRequest(route.prefill, {
        body: prefillBody,
        dispatch: prefillDispatch,
        bootstrap,
      });
      const pleg = attempt.open(route.prefill, 'prefill', preq.body, preq.headers);
      prefillDone = this.awaitPrefill(attempt, pleg, flow).then((r) => {
        pleg.obs.end(r instanceof MotorError ? r.code : null);
        pleg.release(r instanceof MotorError ? r : null);
        return r;
      });
    }
    const metaserverUrl = directTrigger ? `${this.deps.publicUrl()}/v1/metaserver` : null;
    const dreq = buildLegRequest(route.decode, {
      body: session.client.body,
      dispatch: decodeDispatch,
      metaserverUrl,
      bootstrap,
    });
    const dleg = attempt.open(route.decode, 'decode', dreq.body, dreq.headers);
    // A prefill failure stops both legs and fails the attempt unless the decode already streams.
    void prefillDone.then((r) => {
      if (r instanceof MotorError) {
        // Stopped because the decode leg failed first: the decode's own answer carries the error.
        if (r.stoppedByPeer) return;
        if (!session.sink.committed) attempt.fail(r, 'peer_failed');
        else
          this.deps.log.warn(
            { root_request_id: attempt.ids.rootRequestId, err: r.message },
            'prefill leg failed after commit',
          );
      } else {
        attempt.prefillDone();
        session.rewrite.cachedTokens = cachedTokensOf(r.usage);
      }
    });
    // Trigger (proxy): the prefill side answers `prepared` at once; both legs must be accepted before commit.
    const gate = flow === 'trigger' && !directTrigger ? prefillDone : null;
    const waitPrefillAtEnd = !session.client.stream ? prefillDone : null;
    return this.relayDecode(attempt, dleg, gate, waitPrefillAtEnd);
  }

  /** Awaits a prefill leg and turns its answer into a PrefillResult (or the failure). */
  private async awaitPrefill(
    attempt: Attempt,
    leg: Leg,
    flow: 'handoff' | 'trigger' | 'bootstrap',
  ): Promise<PrefillResult | MotorError> {
    const instance = leg.instance;
    const fail = (err: MotorError): MotorError => {
      attempt.prefillFailed = true;
      return err;
    };
    let res: ResponseData;
    let body: Buffer;
    try {
      res = await leg.response!;
      body = await readAll(res.body);
    } catch (err) {
      return attempt.failure ?? fail(connectionError(instance, 'prefill', err));
    }
    if (attempt.failure) return attempt.failure;
    if (res.statusCode !== 200) {
      return fail(
        errorForEngineStatus(instance.id, 'prefill', {
          status: res.statusCode,
          body,
          contentType: String(res.headers['content-type'] ?? 'application/json'),
        }),
      );
    }
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      return fail(
        new MotorError('protocol_error', `prefill instance ${instance.id} answered invalid JSON`, {
          instanceId: instance.id,
        }),
      );
    }
    const protocolError = (message: string): MotorError =>
      fail(
        new MotorError('protocol_error', `prefill instance ${instance.id}: ${message}`, {
          instanceId: instance.id,
        }),
      );
    const { ids } = attempt;
    if (instance.mode === 'proxy') {
      const candidate =
        isPlainObject(json) && json.object !== PREFILL_RESULT_OBJECT && MOTOR_PREFILL_RESULT_KEY in json
          ? json[MOTOR_PREFILL_RESULT_KEY]
          : json;
      const parsed = parsePrefillResult(candidate, '');
      if (!parsed.ok)
        return protocolError(`invalid PrefillResult: ${parsed.error.path}: ${parsed.error.message}`);
      const result = parsed.value;
      if (
        !matchesDispatch(result, {
          root_request_id: ids.rootRequestId,
          pair_id: ids.pairId,
          attempt_seq: ids.attemptSeq,
        })
      ) {
        return protocolError('PrefillResult belongs to another attempt');
      }
      if (flow === 'handoff' && (result.status !== 'completed' || result.handoff_mode !== 'handoff')) {
        return protocolError(
          `expected a completed handoff result, got ${result.status}/${result.handoff_mode}`,
        );
      }
      return result;
    }
    const adapter = engineAdapterFor(instance.engine);
    const legKind =
      flow === 'handoff' ? 'handoff_prefill' : flow === 'trigger' ? 'trigger_prefill' : 'bootstrap_prefill';
    const parsed = adapter.parsePrefillResponse(legKind, json);
    if (!parsed.ok) return protocolError(parsed.message);
    return buildPrefillResult({
      root_request_id: ids.rootRequestId,
      engine_request_id: ids.engineRequestId,
      pair_id: ids.pairId,
      attempt_seq: ids.attemptSeq,
      status: 'completed',
      handoff_mode: flow,
      payload: parsed.payload,
      usage: parsed.usage,
    });
  }

  /**
   * Relays the decode (or single) leg to the client. Commit barrier: nothing is sent to the client
   * before the leg answered 200 and produced its first bytes (and `gate`, when given, resolved), so
   * every failure before that can still become a retry or the engine's own 4xx.
   */
  private async relayDecode(
    attempt: Attempt,
    leg: Leg,
    gate: Promise<PrefillResult | MotorError> | null,
    waitPrefillAtEnd: Promise<PrefillResult | MotorError> | null = null,
  ): Promise<MotorError | null> {
    const { session } = attempt;
    const instance = leg.instance;
    let res: ResponseData;
    try {
      res = await leg.response!;
    } catch (err) {
      return attempt.failure ?? this.failBeforeCommit(attempt, connectionError(instance, leg.role, err));
    }
    if (attempt.failure) {
      res.body.destroy();
      return attempt.failure;
    }
    if (res.statusCode !== 200) {
      let body: Buffer;
      try {
        body = await readAll(res.body);
      } catch (err) {
        return attempt.failure ?? this.failBeforeCommit(attempt, connectionError(instance, leg.role, err));
      }
      const err = errorForEngineStatus(instance.id, leg.role, {
        status: res.statusCode,
        body,
        contentType: String(res.headers['content-type'] ?? 'application/json'),
      });
      return this.failBeforeCommit(attempt, err);
    }
    if (gate) {
      const g = await gate;
      if (g instanceof MotorError || attempt.failure) {
        res.body.destroy();
        return attempt.failure ?? this.failBeforeCommit(attempt, g as MotorError);
      }
    }
    if (!session.client.stream) return this.relayJson(attempt, leg, res, waitPrefillAtEnd);
    return this.relayStream(attempt, leg, res);
  }

  private failBeforeCommit(attempt: Attempt, err: MotorError): MotorError {
    attempt.fail(err, 'peer_failed');
    return attempt.failure ?? err;
  }

  private async relayJson(
    attempt: Attempt,
    leg: Leg,
    res: ResponseData,
    waitPrefill: Promise<PrefillResult | MotorError> | null,
  ): Promise<MotorError | null> {
    const { session } = attempt;
    let body: Buffer;
    try {
      body = await readAll(res.body);
    } catch (err) {
      return attempt.failure ?? this.failBeforeCommit(attempt, connectionError(leg.instance, leg.role, err));
    }
    leg.obs.firstByte();
    if (waitPrefill) await waitPrefill;
    if (attempt.failure) return attempt.failure;
    let asIs = !needsRewrite(body, session.rewrite);
    if (!asIs) {
      const cut = withoutTrailingNullKv(body);
      if (cut !== null && !needsRewrite(cut, session.rewrite)) [body, asIs] = [cut, true];
    }
    if (asIs) {
      // nothing to merge or strip: relay the engine's bytes as they are (no parse, no stringify)
      attempt.committed();
      session.sink.sendBytes(200, body, String(res.headers['content-type'] ?? 'application/json'));
      return null;
    }
    let obj: unknown;
    try {
      obj = JSON.parse(body.toString('utf8'));
    } catch {
      return this.failBeforeCommit(
        attempt,
        new MotorError('protocol_error', `${leg.role} instance ${leg.instance.id} answered invalid JSON`, {
          instanceId: leg.instance.id,
        }),
      );
    }
    if (isPlainObject(obj)) rewriteResponseObject(obj, session.rewrite);
    attempt.committed();
    session.sink.sendJson(200, obj);
    return null;
  }

  private relayStream(attempt: Attempt, leg: Leg, res: ResponseData): Promise<MotorError | null> {
    const { session } = attempt;
    const { sink } = session;
    const relay = new SseRelay(session.rewrite);
    const body = res.body;
    return new Promise<MotorError | null>((resolve) => {
      let settled = false;
      const settle = (err: MotorError | null): void => {
        if (settled) return;
        settled = true;
        if (err === null) {
          sink.endStream();
          resolve(null);
          return;
        }
        if (!sink.committed) {
          resolve(this.failBeforeCommit(attempt, err));
          return;
        }
        // After commit: stop both legs, one error frame (unless the engine sent its own), [DONE].
        attempt.fail(
          err,
          err.code === 'idle_timeout' || err.code === 'deadline_exceeded' ? 'timeout' : 'peer_failed',
        );
        const final = attempt.failure ?? err;
        if (!session.gone) sink.streamError(relay.upstreamError !== null ? null : final);
        resolve(null);
      };
      attempt.onFail((err) => {
        body.destroy();
        settle(err);
      });
      body.on('data', (chunk: Buffer) => {
        if (settled) return;
        const out = relay.push(chunk);
        // The engine's [DONE] (with no error before it) ends the answer: the last frames and our
        // terminator leave in one socket write instead of waiting for the upstream's end of body.
        const last = relay.sawDone && relay.upstreamError === null;
        if (out !== null) {
          session.obs.chunk(out);
          if (!sink.committed) {
            leg.obs.firstByte();
            sink.commitStream();
            attempt.committed();
          } else {
            attempt.touch();
          }
          if (last) sink.res.cork();
          if (!sink.write(out) && !last) {
            body.pause();
            sink.res.once('drain', () => body.resume());
          }
        }
        if (last) {
          settle(null);
          if (out !== null) sink.res.uncork();
        }
      });
      body.on('end', () => {
        if (relay.upstreamError !== null) {
          settle(
            new MotorError('engine_error', `decode engine stream failed: ${relay.upstreamError}`, {
              retryable: false,
            }),
          );
        } else if (!relay.sawDone) {
          settle(
            new MotorError(
              'connection_error',
              `${leg.role} instance ${leg.instance.id} ended the stream without [DONE]`,
              {
                instanceId: leg.instance.id,
              },
            ),
          );
        } else {
          settle(null);
        }
      });
      body.on('error', (err) => settle(attempt.failure ?? connectionError(leg.instance, leg.role, err)));
    });
  }

  /** Stops both legs of a failed attempt (fire and forget; failures are logged). */
  stopLegs(attempt: Attempt, reason: DispatchStopReason): void {
    const { route, ids } = attempt;
    const { upstreams, config, log } = this.deps;
    const targets = route.kind === 'pd' ? [route.prefill, route.decode] : [route.instance];
    const stopBody = JSON.stringify(
      buildDispatchStopRequest({
        root_request_id: ids.rootRequestId,
        engine_request_id: ids.engineRequestId,
        attempt_seq: ids.attemptSeq,
        pair_id: ids.pairId,
        reason,
        sent_at_ms: Date.now(),
      }),
    );
    for (const instance of targets) {
      if (instance.mode === 'proxy') {
        void upstreams.postJson(instance, '/v1/dispatch/stop', stopBody, config.timeouts.stopMs).then((r) => {
          attempt.session.obs.stopResult(reason, stopResultOf(r));
          if ('error' in r || r.status !== 200) {
            log.warn(
              { instance: instance.id, root_request_id: ids.rootRequestId, result: r },
              'dispatch stop failed',
            );
          }
        });
        continue;
      }
      // Direct: closing the connection (done by the leg abort) is how vLLM aborts; SGLang also gets a call.
      if (!attempt.legs.some((l) => l.instance === instance)) continue;
      attempt.session.obs.stopResult(reason, 'connection_closed');
      const plan = engineAdapterFor(instance.engine).abortPlan(ids.engineRequestId);
      if (plan.request) {
        void upstreams.postJson(
          instance,
          plan.request.path,
          JSON.stringify(plan.request.body),
          config.timeouts.stopMs,
        );
      }
    }
    log.info(
      {
        root_request_id: ids.rootRequestId,
        attempt_seq: ids.attemptSeq,
        pair_id: ids.pairId,
        reason,
        code: attempt.failure?.code,
      },
      'attempt stopped',
    );
  }
}

function connectionError(instance: Instance, role: string, err: unknown): MotorError {
  const e = err as { code?: string; message?: string };
  return new MotorError(
    'connection_error',
    `${role} instance ${instance.id} (${instance.url}): ${e.code ? `${e.code} ` : ''}${e.message ?? String(err)}`,
    { instanceId: instance.id },
  );
}

function cachedTokensOf(usage: Record<string, unknown> | null | undefined): number | null {
  const details = usage?.prompt_tokens_details;
  if (typeof details !== 'object' || details === null) return null;
  const cached = (details as { cached_tokens?: unknown }).cached_tokens;
  return typeof cached === 'number' ? cached : null;
}
