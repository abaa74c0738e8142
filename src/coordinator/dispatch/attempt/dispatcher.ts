import { clientErrorFilter, type ClientErrorFilter } from '../../client-errors.js';
import type { ServerResponse } from 'node:http';
import type { Logger } from '../../../common/logger.js';
import type { CoordinatorConfig } from '../../../config/coordinator-config.js';
import {
  noopDispatchObserver,
  routeSummary,
  type DispatchObserver,
} from '../../../observability/dispatch-observer.js';
import { ENGINE_PATHS, type ClientRequest } from '../../internal-request/client-request.js';
import type { InstanceSource } from '../../fleet/instance-source.js';
import { HOP_HEADER, nextHops } from '../../fleet/hop-header.js';
import { MotorError } from '../../../common/motor-error.js';
import type { Route } from '../../scheduling-bridge/route.js';
import type { SchedulingAdapter, Selection } from '../../scheduling-bridge/scheduling-adapter.js';
import type { KvPrediction } from '../../../scheduling/index.js';
import type { Upstreams } from '../../fleet/upstream.js';
import { Attempt, type AttemptServices } from './attempt.js';
import { backoffDelayMs } from './backoff.js';
import type { ClientSink } from '../request/client-sink.js';
import { runConcurrent, type ConcurrentFlowDeps } from '../flows/trigger-bootstrap-flow.js';
import { runHandoff, type HandoffCarry } from '../flows/handoff-flow.js';
import { LegTransports } from '../transport/leg-transport.js';
import { Migration } from '../migration/migration.js';
import { RequestCancellation } from '../request/request-cancellation.js';
import type { RequestContext } from '../request/request-context.js';
import { runSingle } from '../flows/single-flow.js';
import { stopLegs } from './stop-legs.js';
import {
  DecodeFirst,
  decodeRunsWholeRequests,
  type DecodeFirstOutcome,
  type PredictionSource,
} from '../../scheduling-bridge/decode-first.js';
import type { PendingTriggers } from '../flows/pending-trigger.js';
import type { PeerSecrets } from '../../../common/peer-secrets.js';

export interface DispatcherDeps {
  config: CoordinatorConfig;
  source: InstanceSource;
  /** Pair selection, load tracking, circuit breakers (the scheduling library). */
  scheduling: SchedulingAdapter;
  upstreams: Upstreams;
  triggers: PendingTriggers;
  log: Logger;
  /** Metrics, tracing, access log, dashboard (default: none). */
  observer?: DispatchObserver;
  /** Base URL engines use to reach this coordinator (direct trigger metaserver). */
  publicUrl: () => string;
  /** The engine-proxy peer secret sent on legs and stops (`engineProxy`); absent = none. */
  peerSecrets?: PeerSecrets | null;
  /** What the engines' KV events predict for a request (`precise-prefix`, kv-prediction.ts); never rejects. */
  kvPrediction?: (client: ClientRequest) => Promise<KvPrediction | undefined>;
  /** Counts decode-first's checks (`motor_decode_first_total`, decode-first-metrics.ts); default none. */
  decodeFirstCount?: (outcome: DecodeFirstOutcome, source: PredictionSource) => void;
  /** A predicted request's cached tokens as reported by its engine (`motor doctor`). */
  cachedTokensReported?: (instanceId: string, predicted: number, reported: number) => void;
}

/** Where the next attempt goes: instances to avoid, or a route the prefill-failure policy forces. */
interface RetryPlan {
  readonly exclude: Set<string>;
  forced: Route | null;
  /** The last failure seen (an earlier attempt's, when a retry then succeeded). */
  lastError: MotorError | null;
  /** A handoff prefill the next attempt may reuse (its decode was never reached). */
  handoff: HandoffCarry | null;
}

/**
 * Runs client requests as attempts over P/D pairs (DESIGN.md §2–3): the attempt loop, retries with
 * backoff, and the prefill-failure policy. Each attempt runs one flow (single, handoff, concurrent).
 */
export class Dispatcher {
  private readonly services: AttemptServices;
  private readonly flowDeps: ConcurrentFlowDeps;
  private readonly decodeFirst: DecodeFirst | null;
  private readonly clientError: ClientErrorFilter;

  constructor(readonly deps: DispatcherDeps) {
    const { config, source, scheduling, upstreams, log, publicUrl, peerSecrets } = deps;
    const stopMs = config.timeouts.stopMs;
    const transports = new LegTransports({ upstreams, stopMs, log, publicUrl, peerSecrets });
    this.services = {
      source,
      scheduling,
      upstreams,
      transports,
      timeouts: config.timeouts,
      stopLegs: (attempt, reason) => stopLegs(attempt, reason, transports, log),
      cachedTokensReported: deps.cachedTokensReported,
    };
    this.flowDeps = { triggers: deps.triggers, log };
    this.clientError = clientErrorFilter(config.server.instanceErrorsToClients, log);
    this.decodeFirst = config.decodeFirst?.enabled
      ? new DecodeFirst(
          config.decodeFirst,
          scheduling.config.library.decode.scorers.map((s) => s.type),
          scheduling,
          deps.decodeFirstCount,
        )
      : null;
  }

  async serve(
    client: ClientRequest,
    rootRequestId: string,
    /** The client's route (metrics and logs); every leg posts to the engine route of `client.kind`. */
    path: string,
    res: ServerResponse,
    /** Where the pipeline's OpenAI frames go: the client API's own sink (src/coordinator/apis/). */
    sink: ClientSink,
    /** Session affinity key (`x-session-id`) and API key (rate limiting) of the client request. */
    meta: { sessionKey?: string; apiKey?: string } = {},
    /** The request's cancellation (the gateway makes it before admission). */
    cancellation: RequestCancellation = new RequestCancellation(res),
  ): Promise<void> {
    const { config, scheduling } = this.deps;
    const obs = (this.deps.observer ?? noopDispatchObserver).requestStart({
      rootRequestId,
      path,
      model: client.model,
      stream: client.stream,
      headers: res.req.headers,
    });
    const kvPrediction = await this.deps.kvPrediction?.(client);
    const schedulingRequest = scheduling.requestFor(client, meta);
    const ctx: RequestContext = {
      rootRequestId,
      client,
      path: ENGINE_PATHS[client.kind],
      sink,
      cancellation,
      obs,
      // with a prediction the prompt's length is known in the model's own tokens: load (pending prefill
      // tokens) is then counted in the same unit as the predicted cached tokens subtracted from it
      schedulingRequest: kvPrediction
        ? { ...schedulingRequest, promptTokens: kvPrediction.promptTokens, kvPrediction }
        : schedulingRequest,
      rewrite: { cachedTokens: null, stripTokenIds: !client.wantsTokenIds },
      hops: nextHops(res.req.headers[HOP_HEADER]),
      migration: new Migration(client, config.migration.maxPerRequest, obs, config.migration.nonStreamLegs),
      clientError: this.clientError,
    };
    cancellation.startDeadline(config.timeouts.totalMs);
    const plan: RetryPlan = { exclude: new Set(), forced: null, lastError: null, handoff: null };
    try {
      // migrations (after commit) do not use up retries (before commit)
      for (let seq = 1; seq <= config.retry.maxAttempts + ctx.migration.count; seq++) {
        const migrating = outputStarted(ctx);
        if (seq > 1 && !migrating) await cancellation.sleep(backoffDelayMs(seq, config.retry));
        if (cancellation.cancelled) break;
        const attempt = this.nextAttempt(ctx, plan, seq);
        if (attempt === null) break;
        const outcome = await this.run(attempt, plan);
        if (outcome === null) return;
        ctx.schedulingRequest.kvPrediction?.release?.(); // its blocks will not be stored there
        plan.lastError = outcome;
        if (outputStarted(ctx)) {
          if (!this.migrateAfter(outcome, plan, ctx)) break;
        } else if (!this.retryAfter(attempt, outcome, plan)) break;
      }
      this.fail(ctx, plan);
    } finally {
      cancellation.close();
      ctx.obs.end(res.statusCode, plan.lastError?.code ?? null);
    }
  }

  /** The next attempt on a route the scheduler picks (or the forced one); null when none exists. */
  private nextAttempt(ctx: RequestContext, plan: RetryPlan, seq: number): Attempt | null {
    let selection: Selection | null = null;
    try {
      if (!plan.forced)
        selection = this.deps.scheduling.select(
          this.deps.source.routable(),
          ctx.schedulingRequest,
          plan.exclude,
        );
      // a kept handoff prefill (plan.handoff) is reused rather than skipped
      if (selection && this.decodeFirst && !plan.handoff)
        selection = this.decodeFirst.apply(selection, ctx.schedulingRequest);
    } catch (err) {
      plan.lastError = err instanceof MotorError ? err : new MotorError('internal', String(err));
      return null;
    }
    const route = plan.forced ?? selection!.route;
    const attempt = new Attempt(this.services, ctx, route, seq, selection);
    ctx.obs.attempt(seq, routeSummary(route));
    return attempt;
  }

  /** Runs one attempt's flow; null = the response was delivered (or ended after commit), else the failure. */
  private async run(attempt: Attempt, plan: RetryPlan): Promise<MotorError | null> {
    try {
      const { route } = attempt;
      if (route.kind === 'single') return await runSingle(attempt, route);
      if (route.flow === 'handoff') return await runHandoff(attempt, route, plan);
      return await runConcurrent(attempt, route, this.flowDeps);
    } catch (err) {
      const outcome = err instanceof MotorError ? err : new MotorError('internal', (err as Error).message);
      attempt.fail(outcome, 'other');
      return outcome;
    } finally {
      attempt.finish();
    }
  }

  /** Whether a failed attempt gets a successor (and where it should go). */
  private retryAfter(attempt: Attempt, outcome: MotorError, plan: RetryPlan): boolean {
    const { ctx, route } = attempt;
    if (outputStarted(ctx) || ctx.cancellation.cancelled || !outcome.retryable) return false;
    this.deps.log.warn(
      {
        root_request_id: ctx.rootRequestId,
        attempt_seq: attempt.ids.attemptSeq,
        code: outcome.code,
        err: outcome.message,
      },
      'attempt failed before the first byte; retrying',
    );
    ctx.obs.retry(attempt.ids.attemptSeq, outcome.code);
    if (outcome.instanceId) plan.exclude.add(outcome.instanceId);
    // the handoff's KV is still unread only when its decode was never reached (handoff-flow.ts)
    if (!attempt.legs.some((leg) => leg.role === 'decode' && leg.unreached)) plan.handoff = null;
    if (attempt.prefillFailed && route.kind === 'pd') {
      const policy = this.deps.config.dispatch.prefillFailurePolicy;
      if (policy === 'error') return false;
      // Only a vLLM decode can run a plain request (decode-first.ts); an SGLang decode always waits
      // for a bootstrap peer, so it gets an ordinary retry.
      if (policy === 'fallback-decode-only' && decodeRunsWholeRequests(route.decode))
        plan.forced = { kind: 'single', instance: route.decode, degraded: true };
    }
    return true;
  }

  /**
   * A committed stream's attempt failed: whether a migration continues it (migration.ts); if not,
   * `plan.lastError` becomes the error frame the client gets.
   */
  private migrateAfter(outcome: MotorError, plan: RetryPlan, ctx: RequestContext): boolean {
    if (ctx.cancellation.cancelled) return false; // the client went, or the deadline passed
    const refused = ctx.migration.begin(outcome);
    if (refused !== null) {
      plan.lastError = refused;
      return false;
    }
    this.deps.log.warn(
      { root_request_id: ctx.rootRequestId, code: outcome.code, err: outcome.message },
      'committed stream failed; migrating it to a new attempt',
    );
    if (outcome.instanceId) plan.exclude.add(outcome.instanceId);
    plan.forced = null;
    plan.handoff = null; // a kept prefill's KV is of the old prompt, not the continuation's
    return true;
  }

  /** No attempt delivered: the client gets the last failure (the deadline's, when it passed). */
  private fail(ctx: RequestContext, plan: RetryPlan): void {
    const { cancellation } = ctx;
    if (cancellation.deadlineHit && plan.lastError?.code !== 'deadline_exceeded')
      plan.lastError = cancellation.reason;
    plan.lastError ??= cancellation.reason;
    if (!cancellation.clientGone)
      ctx.sink.fail(
        ctx.clientError(
          plan.lastError ?? new MotorError('internal', 'no attempt was made'),
          ctx.rootRequestId,
        ),
      );
  }
}

/**
 * Output of the answer was relayed (to a stream's client, or into an assembled answer): a failure
 * now is migrated or ends the request, never retried from the start.
 */
function outputStarted(ctx: RequestContext): boolean {
  return ctx.sink.committed || ctx.migration.started;
}
