import { randomUUID } from 'node:crypto';
import type { DispatchStopReason } from '../../../protocol/index.js';
import type { Instance, InstanceSource } from '../../fleet/instance-source.js';
import { MotorError } from '../../../common/motor-error.js';
import { decodeKvLoad } from '../../../engine-adapters/index.js';
import { HOP_HEADER, LOCAL_HOP_ID } from '../../fleet/hop-header.js';
import type { Route } from '../../scheduling-bridge/route.js';
import type { SchedulingAdapter, Selection } from '../../scheduling-bridge/scheduling-adapter.js';
import { bodyLength, type Upstreams } from '../../fleet/upstream.js';
import type { Cancellation } from '../request/cancellation.js';
import type { AttemptIds, LegInput, LegRole } from '../transport/leg-request.js';
import type { LegTransport, LegTransports } from '../transport/leg-transport.js';
import { Leg } from '../transport/leg.js';
import type { RequestContext } from '../request/request-context.js';

/** What an attempt needs from the coordinator; built once by the Dispatcher. */
export interface AttemptServices {
  readonly source: InstanceSource;
  readonly scheduling: Pick<SchedulingAdapter, 'beginLeg' | 'unused'>;
  readonly upstreams: Pick<Upstreams, 'request'>;
  readonly transports: LegTransports;
  readonly timeouts: {
    readonly firstTokenMs: number;
    readonly idleMs: number;
    readonly clientStallMs: number;
  };
  /** Tells the engines of a failed attempt to stop its legs (stop-legs.ts). */
  readonly stopLegs: (attempt: Attempt, reason: DispatchStopReason) => void;
  /** A predicted request's cached tokens as its engine reported them (`motor doctor`'s samples). */
  readonly cachedTokensReported?: (instanceId: string, predicted: number, reported: number) => void;
}

/** One attempt: a route, fresh ids, its legs, and the one place failures stop both legs. */
export class Attempt {
  readonly ids: AttemptIds;
  readonly legs: Leg[] = [];
  /** Child of the request's cancellation: failing the attempt cancels only this one. */
  readonly cancellation: Cancellation;
  /** The body its legs are built from: the client's, or a migration's continuation (migration.ts). */
  readonly body: Record<string, unknown>;
  /** This attempt's stream reached the client (a migrated one joins a response already committed). */
  streaming = false;
  /** The prefill leg failed (for the prefill-failure policy). */
  prefillFailed = false;
  /** From the scheduling decision: prompt tokens expected cached on the prefill side. */
  private readonly cachedPromptTokens: number;
  /** The instances the scheduler picked (forced routes: none). */
  private readonly picked: readonly Instance[];
  /** The decode load reserved at the pick (scheduling-adapter.ts); its leg takes it, finish frees it. */
  private readonly reservation: Selection['reservation'];
  private watchdog: NodeJS.Timeout | null = null;
  /** The decode's usage was judged for KV load (once per attempt). */
  private kvLoadJudged = false;
  /** The client's socket is full and the relay paused the upstream: engine silence is not counted. */
  private clientPaused = false;
  /** The client's own bound while paused; made at the first pause, re-armed by later ones. */
  private stallTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly services: AttemptServices,
    readonly ctx: RequestContext,
    readonly route: Route,
    seq: number,
    selection: Selection | null,
  ) {
    this.ids = {
      rootRequestId: ctx.rootRequestId,
      engineRequestId: `${ctx.rootRequestId}#a${seq}`,
      pairId: randomUUID(),
      attemptSeq: seq,
    };
    this.body = ctx.migration.legBody;
    this.cachedPromptTokens = selection?.cachedPromptTokens ?? 0;
    this.picked = selection?.picked ?? [];
    this.reservation = selection?.reservation ?? null;
    this.cancellation = ctx.cancellation.child();
    // The KV-load judgement belongs to the attempt whose prefill set it (prefill-result.ts).
    ctx.rewrite.onDecodeUsage = null;
    this.cancellation.onCancel((err, reason) => this.stop(err, reason));
    const { firstTokenMs } = services.timeouts;
    // Non-stream responses arrive whole: the watchdog then covers the prefill leg only (none for single).
    if (firstTokenMs > 0 && (streamedLegs(ctx) || route.kind === 'pd')) {
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

  /** The failure the attempt ended with (its own, or the request's cancellation); null while it runs. */
  get failure(): MotorError | null {
    return this.cancellation.reason;
  }

  /** The engine on `instanceId` reported `cachedTokens` for the prompt: sampled when it was predicted. */
  reportedCachedTokens(instanceId: string, cachedTokens: number | null): void {
    const predicted = this.ctx.schedulingRequest.kvPrediction?.cachedTokens.get(instanceId);
    if (predicted !== undefined && cachedTokens !== null)
      this.services.cachedTokensReported?.(instanceId, predicted, cachedTokens);
  }

  /**
   * The P/D decode's usage: did it load the KV it was handed (kv-load.ts)? Once per attempt (a
   * stream with continuous usage stats repeats the usage on every frame).
   */
  decodeUsageReported(usage: Record<string, unknown>): void {
    if (this.kvLoadJudged || this.route.kind !== 'pd') return;
    this.kvLoadJudged = true;
    this.ctx.obs.kvLoad?.(this.route.prefill.id, this.route.decode.id, decodeKvLoad(usage).verdict);
  }

  transportFor(instance: Instance): LegTransport {
    return this.services.transports.for(instance);
  }

  /** Starts a leg's HTTP request; `leg.response` resolves with the response headers. */
  open(instance: Instance, role: LegRole, input: LegInput): Leg {
    const { source, transports, scheduling, upstreams } = this.services;
    const transport = transports.for(instance);
    input.source ??= this.ctx.client.source; // leg bodies spliced from the client's bytes
    const request = transport.request(instance, input);
    request.headers[HOP_HEADER] = this.ctx.hops ?? LOCAL_HOP_ID;
    const claim = source.acquire ? source.acquire(instance) : () => {};
    const leg = new Leg(instance, role, transport, claim, bodyLength(request.body));
    this.legs.push(leg);
    leg.tracking = scheduling.beginLeg(
      instance,
      role,
      this.ctx.schedulingRequest,
      this.cachedPromptTokens,
      this.reservation,
    );
    leg.obs = this.ctx.obs.legStart(role, instance.id, request.headers);
    if (claim === undefined) {
      // Drained or paused since the route was picked: no new work; a retry picks another instance.
      leg.response = Promise.reject(
        new MotorError('instance_withdrawn', `instance ${instance.id} no longer takes new work`, {
          instanceId: instance.id,
        }),
      );
    } else {
      leg.response = upstreams.request(instance, {
        path: this.ctx.path,
        body: request.body,
        headers: request.headers,
        signal: leg.ctl,
      });
      leg.response.then(
        (res) => {
          leg.status = res.statusCode;
          source.reportSuccess?.(instance);
        },
        (err: unknown) => {
          // a large upload cut by the engine is the request's (upload-refusal.ts), not a health signal
          if (!leg.ctl.aborted && !leg.uploadRefused(err))
            source.reportFailure?.(instance, (err as Error).message);
        },
      );
    }
    leg.response.catch(() => {}); // observed by whoever awaits it; never an unhandled rejection
    if (this.failure) leg.ctl.abort();
    return leg;
  }

  /**
   * First byte reached the client: the first-token watchdog becomes the idle watchdog. `first`: the
   * response's first byte (false for a migrated attempt joining a committed stream).
   */
  committed(first = true): void {
    this.streaming = true;
    if (first) this.ctx.obs.committed();
    for (const leg of this.legs) leg.tracking?.firstToken();
    this.clearWatchdog();
    const { idleMs } = this.services.timeouts;
    if (idleMs > 0) {
      // Measures the engine only: a gap that ends while the client is not reading is the client's.
      this.watchdog = setTimeout(() => {
        if (!this.clientPaused)
          this.fail(new MotorError('idle_timeout', `no stream data for ${idleMs} ms`), 'timeout');
      }, idleMs);
    }
  }

  /**
   * The client's socket stopped draining and the relay paused the upstream: the idle watchdog stops
   * counting and the client's own bound (`timeouts.clientStallMs`) starts. Timers are made once and
   * re-armed (no allocation per pause).
   */
  clientStalled(): void {
    this.clientPaused = true;
    const { clientStallMs } = this.services.timeouts;
    if (clientStallMs <= 0 || this.failure) return;
    if (this.stallTimer) this.stallTimer.refresh();
    else this.stallTimer = setTimeout(() => this.cutStalledClient(clientStallMs), clientStallMs);
  }

  /** The client's socket drained: the engine's idle watchdog counts again, from now. */
  clientDrained(): void {
    this.clientPaused = false;
    if (!this.failure) this.watchdog?.refresh();
  }

  /** Non-stream: the prefill leg is done, the rest is bounded by the overall deadline. */
  prefillDone(): void {
    if (streamedLegs(this.ctx)) return;
    this.clearWatchdog();
  }

  /** A stream chunk arrived: re-arm the idle watchdog (no allocation). */
  touch(): void {
    this.watchdog?.refresh();
  }

  /** Fails the attempt once (later calls are no-ops): every open leg is aborted and its engine stopped. */
  fail(err: MotorError, reason: DispatchStopReason): void {
    this.cancellation.cancel(err, reason);
  }

  /** A failure before the first byte reached the client: the attempt's failure (it may be retried). */
  failBeforeCommit(err: MotorError): MotorError {
    this.fail(err, 'peer_failed');
    return this.failure ?? err;
  }

  /** Ends the attempt's bookkeeping (legs released, timers cleared, detached from the request). */
  finish(): void {
    this.clearWatchdog();
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
    this.cancellation.release();
    const failure = this.failure;
    for (const leg of this.legs) leg.obs.end(failure?.code ?? null);
    for (const leg of this.legs) leg.release(failure);
    this.reservation?.release();
    for (const instance of this.picked)
      if (!this.legs.some((leg) => leg.instance === instance)) this.services.scheduling.unused(instance);
  }

  /** The cancellation's first listener: closes every leg's socket and stops the engines' work. */
  private stop(err: MotorError, reason: DispatchStopReason): void {
    this.ctx.obs.attemptFailed(err.code, reason);
    this.clearWatchdog();
    for (const leg of this.legs) leg.ctl.abort();
    this.services.stopLegs(this, reason);
  }

  /**
   * A stream client left its socket full for `clientStallMs`: the request ends as a client failure
   * (`client_stalled`, charged to no instance, legs stopped as for a disconnect) and its socket is
   * closed — nothing more can be written to it.
   */
  private cutStalledClient(clientStallMs: number): void {
    if (!this.clientPaused || this.failure) return; // drained since the last pause
    this.ctx.cancellation.cancel(
      new MotorError('client_stalled', `the client read nothing for ${clientStallMs} ms`),
      'client_disconnect',
    );
    this.ctx.sink.cut();
  }

  private clearWatchdog(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
  }
}

/** The decode (or single) leg streams: a stream client's, or an assembled non-stream answer's. */
function streamedLegs(ctx: RequestContext): boolean {
  return ctx.client.stream || ctx.migration.assembles;
}
