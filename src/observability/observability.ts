import type { Span, Context } from '@opentelemetry/api';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger.js';
import type { KvLoadVerdict } from '../engine-adapters/kv-load.js';
import {
  boundedCode,
  boundedFlow,
  boundedRoute,
  CoordinatorMetrics,
  type MetricsSources,
} from './coordinator-metrics.js';
import type {
  DispatchObserver,
  LegObserver,
  ObservedLegRole,
  PrefillKvSkipReason,
  RequestObserver,
  RequestStartInfo,
  RouteSummary,
} from './dispatch-observer.js';
import { KvLoadWatch } from './kv-load-watch.js';
import { RecentRequests, type LegSummary, type RequestSummary } from './recent-requests.js';
import { endSpan, forwardableTraceContext, type Tracing } from './tracing.js';

const SEP = 0x0a;

/** SSE frames in a forwarded chunk: counts blank-line separators (`\n\n`), no parsing. */
export function countFrames(buf: Buffer): number {
  let n = 0;
  let i = buf.indexOf(SEP);
  while (i >= 0 && i + 1 < buf.length) {
    if (buf[i + 1] === SEP) {
      n++;
      i = buf.indexOf(SEP, i + 2);
    } else {
      i = buf.indexOf(SEP, i + 1);
    }
  }
  return n;
}

export interface ObservabilityOptions {
  log: Logger;
  metrics: CoordinatorMetrics;
  tracing: Tracing | null;
  recent: RecentRequests;
  /** Write one `request` access-log line per request (info level). */
  accessLog: boolean;
}

/**
 * The coordinator's DispatchObserver: turns the dispatcher's calls into metrics, spans, one access
 * log line and one recent-request summary per request. Per request it allocates one record and one
 * small object per leg; per forwarded stream chunk it only counts frames and reads the clock.
 */
export class Observability implements DispatchObserver {
  readonly metrics: CoordinatorMetrics;
  readonly recent: RecentRequests;
  readonly tracing: Tracing | null;
  private readonly accessLog: Logger | null;
  private active = 0;

  /** Recent `kv_not_loaded` outcomes per pair (`/ready` shows degraded pairs). */
  readonly kvLoadWatch = new KvLoadWatch();

  constructor(opts: ObservabilityOptions) {
    this.metrics = opts.metrics;
    this.recent = opts.recent;
    this.tracing = opts.tracing;
    this.accessLog = opts.accessLog ? opts.log.child({ component: 'access' }) : null;
  }

  static create(
    log: Logger,
    sources: MetricsSources,
    opts: {
      tracing?: Tracing | null;
      recentRequests?: number;
      accessLog?: boolean;
      defaultMetrics?: boolean;
      /** A prom-client Registry to register Motor's metrics on (default: one of its own). */
      registry?: Registry;
    } = {},
  ): Observability {
    return new Observability({
      log,
      metrics: new CoordinatorMetrics(sources, {
        defaultMetrics: opts.defaultMetrics,
        registry: opts.registry,
      }),
      tracing: opts.tracing ?? null,
      recent: new RecentRequests(opts.recentRequests ?? 100),
      accessLog: opts.accessLog ?? true,
    });
  }

  requestStart(info: RequestStartInfo): RequestObserver {
    this.metrics.inFlight.inc();
    this.active++;
    return new RequestRecord(this, info);
  }

  rejected(path: string, status: number, code: string): void {
    this.metrics.requests.inc({ route: boundedRoute(path), plan: 'none', outcome: boundedCode(code) });
    this.accessLog?.info({ route: path, status, outcome: code, attempts: 0 }, 'request');
  }

  /** Called by RequestRecord.end. */
  finish(rec: RequestRecord, summary: RequestSummary): void {
    this.metrics.inFlight.dec();
    this.active--;
    this.recent.add(summary);
    this.accessLog?.info(
      {
        root_request_id: summary.id,
        route: summary.route,
        model: summary.model,
        stream: summary.stream,
        status: summary.status,
        outcome: summary.outcome,
        plan: summary.plan,
        attempts: summary.attempts,
        ttft_ms: summary.ttftMs,
        duration_ms: summary.durationMs,
        frames: summary.frames,
        ...(rec.kvLoadVerdict === null ? {} : { kv_load: rec.kvLoadVerdict }),
        trace_id: rec.traceId,
      },
      'request',
    );
  }

  /** Client requests being served now. */
  inFlightRequests(): number {
    return this.active;
  }

  async close(): Promise<void> {
    await this.tracing?.shutdown();
  }
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

class RequestRecord implements RequestObserver {
  readonly t0 = performance.now();
  readonly startedAt = Date.now();
  readonly route: string;
  plan = 'none';
  attempts = 0;
  /** Migrations started so far: legs opened after one belong to its continuation. */
  migrations = 0;
  frames = 0;
  firstFrameAt = -1;
  lastFrameAt = -1;
  committedAt = -1;
  /** Code of the current attempt's failure (reset when a new attempt starts). */
  attemptFailure: string | null = null;
  prefillEndAt = -1;
  /** The last P/D attempt's KV-load verdict (access log `kv_load`); null: none seen. */
  kvLoadVerdict: KvLoadVerdict | null = null;
  readonly legs: LegRecord[] = [];
  span: Span | null = null;
  ctx: Context | null = null;
  traceId: string | undefined;
  private migrationSpan: Span | null = null;
  private ended = false;

  constructor(
    readonly obs: Observability,
    readonly info: RequestStartInfo,
  ) {
    this.route = boundedRoute(info.path);
    if (obs.tracing) {
      const { span, ctx } = obs.tracing.startRequest('motor.request', info.headers, {
        'http.route': this.route,
        'motor.root_request_id': info.rootRequestId,
        'motor.stream': info.stream,
      });
      this.span = span;
      this.ctx = ctx;
      this.traceId = span.spanContext().traceId;
    }
  }

  attempt(seq: number, route: RouteSummary): void {
    this.attempts = seq;
    this.plan = boundedFlow(route.flow);
    this.attemptFailure = null;
    this.prefillEndAt = -1;
    this.obs.metrics.decisions.inc({ kind: route.kind, plan: this.plan });
    this.span?.addEvent('attempt', {
      'motor.attempt_seq': seq,
      'motor.plan': this.plan,
      'motor.prefill': route.prefillId ?? '',
      'motor.decode': route.decodeId ?? '',
    });
  }

  legStart(role: ObservedLegRole, instanceId: string, headers: Record<string, string>): LegObserver {
    const leg = new LegRecord(this, role, instanceId, this.attempts, this.migrations);
    this.legs.push(leg);
    const tracing = this.obs.tracing;
    if (tracing && this.ctx) {
      leg.span = tracing.startLeg(
        this.ctx,
        `motor.leg.${role}`,
        {
          'motor.role': role,
          'motor.instance': instanceId,
          'motor.attempt_seq': this.attempts,
          'motor.plan': this.plan,
          'motor.engine_request_id': headers['x-request-id'] ?? '',
        },
        headers,
      );
    } else if (this.info.headers.traceparent !== undefined) {
      // Tracing off: the caller's trace context still reaches the engines, if it is well-formed.
      const forwarded = forwardableTraceContext(this.info.headers.traceparent, this.info.headers.tracestate);
      if (forwarded) Object.assign(headers, forwarded);
    }
    return leg;
  }

  chunk(out: Buffer): void {
    const now = performance.now();
    if (this.firstFrameAt < 0) this.firstFrameAt = now;
    this.lastFrameAt = now;
    this.frames += countFrames(out);
  }

  committed(): void {
    if (this.committedAt < 0) this.committedAt = performance.now();
  }

  attemptFailed(code: string, reason: string): void {
    this.attemptFailure = code;
    this.obs.metrics.attemptFailures.inc({ code: boundedCode(code), reason });
  }

  retry(seq: number, code: string): void {
    this.obs.metrics.retries.inc({ code: boundedCode(code) });
    this.span?.addEvent('retry', { 'motor.attempt_seq': seq, 'motor.code': code });
  }

  kvLoad(prefillId: string, decodeId: string, verdict: KvLoadVerdict): void {
    this.kvLoadVerdict = verdict;
    this.obs.metrics.kvLoad.inc({ prefill: prefillId, decode: decodeId, verdict });
    this.obs.kvLoadWatch.record(prefillId, decodeId, verdict);
  }

  prefillKvSkipped(instanceId: string, reason: PrefillKvSkipReason): void {
    this.obs.metrics.prefillKvSkipped.inc({ instance: instanceId, reason });
    this.span?.addEvent('prefill_kv_skipped', { 'motor.instance': instanceId, 'motor.reason': reason });
  }

  stopResult(reason: string, result: string): void {
    this.obs.metrics.stops.inc({ reason, result });
  }

  /** A span per migration: opened when it starts, ended when the continuation resumes or fails. */
  migration(reason: string, outcome: string): void {
    this.obs.metrics.migrations.inc({ reason: boundedCode(reason), outcome });
    this.span?.addEvent('migration', { 'motor.code': reason, 'motor.outcome': outcome });
    const tracing = this.obs.tracing;
    if (outcome === 'started') {
      this.migrations++;
      if (this.migrationSpan) endSpan(this.migrationSpan, 'migration_failed');
      this.migrationSpan =
        tracing && this.ctx
          ? tracing.startLeg(
              this.ctx,
              'motor.migration',
              { 'motor.code': reason, 'motor.attempt_seq': this.attempts + 1 },
              {},
            )
          : null;
    } else if (this.migrationSpan) {
      endSpan(this.migrationSpan, outcome === 'resumed' ? null : outcome);
      this.migrationSpan = null;
    }
  }

  migrationResumed(seconds: number): void {
    this.obs.metrics.migrationResume.observe(seconds);
  }

  end(status: number, lastErrorCode: string | null): void {
    if (this.ended) return;
    this.ended = true;
    if (this.migrationSpan) endSpan(this.migrationSpan, 'migration_failed');
    this.migrationSpan = null;
    const now = performance.now();
    let outcome = 'ok';
    if (this.attemptFailure !== null) outcome = boundedCode(this.attemptFailure);
    else if (status >= 400) outcome = boundedCode(lastErrorCode ?? 'internal');
    const m = this.obs.metrics;
    const durationS = (now - this.t0) / 1000;
    m.requests.inc({ route: this.route, plan: this.plan, outcome });
    m.requestDuration.observe({ route: this.route, plan: this.plan }, durationS);
    let ttftMs: number | null = null;
    if (this.info.stream && this.firstFrameAt >= 0) {
      ttftMs = this.firstFrameAt - this.t0;
      m.ttft.observe({ route: this.route, plan: this.plan }, ttftMs / 1000);
      if (this.frames > 1) {
        m.itl.observe({ plan: this.plan }, (this.lastFrameAt - this.firstFrameAt) / 1000 / (this.frames - 1));
      }
    }
    if (this.frames > 0) m.streamFrames.inc(this.frames);
    for (const leg of this.legs) leg.end(this.attemptFailure ?? 'abandoned');
    if (this.span) {
      this.span.setAttributes({
        'http.response.status_code': status,
        'motor.plan': this.plan,
        'motor.attempts': this.attempts,
        'motor.outcome': outcome,
      });
      endSpan(this.span, outcome === 'ok' ? null : outcome);
    }
    const rel = (t: number): number | null => (t < 0 ? null : round(t - this.t0));
    this.obs.finish(this, {
      id: this.info.rootRequestId,
      route: this.route,
      model: this.info.model.slice(0, 64),
      stream: this.info.stream,
      status,
      outcome,
      plan: this.plan,
      attempts: this.attempts,
      startedAt: this.startedAt,
      endedAt: Date.now(),
      durationMs: round(now - this.t0),
      ttftMs: ttftMs === null ? null : round(ttftMs),
      frames: this.frames,
      migrations: this.migrations,
      legs: this.legs.map((l): LegSummary => ({
        attempt: l.attempt,
        role: l.role,
        instance: l.instanceId,
        startMs: rel(l.startAt)!,
        firstByteMs: rel(l.firstByteAt),
        endMs: rel(l.endAt),
        error: l.error,
        migration: l.migration,
      })),
    });
  }
}

class LegRecord implements LegObserver {
  readonly startAt = performance.now();
  firstByteAt = -1;
  endAt = -1;
  error: string | null = null;
  span: Span | null = null;

  constructor(
    private readonly req: RequestRecord,
    readonly role: ObservedLegRole,
    readonly instanceId: string,
    readonly attempt: number,
    /** The request's migrations when the leg started (0: its own answer). */
    readonly migration: number,
  ) {}

  firstByte(): void {
    if (this.firstByteAt >= 0) return;
    this.firstByteAt = performance.now();
    const req = this.req;
    if (
      this.role === 'decode' &&
      req.info.stream &&
      req.prefillEndAt >= 0 &&
      req.prefillEndAt <= this.firstByteAt
    ) {
      req.obs.metrics.handoffDuration.observe(
        { plan: req.plan },
        (this.firstByteAt - req.prefillEndAt) / 1000,
      );
    }
    this.span?.addEvent('first_byte');
  }

  end(errorCode: string | null): void {
    if (this.endAt >= 0) return;
    this.endAt = performance.now();
    this.error = errorCode;
    const req = this.req;
    if (this.role === 'prefill' && errorCode === null && this.attempt === req.attempts) {
      req.prefillEndAt = this.endAt;
      req.obs.metrics.prefillDuration.observe({ plan: req.plan }, (this.endAt - this.startAt) / 1000);
    }
    if (this.span) endSpan(this.span, errorCode);
  }
}
