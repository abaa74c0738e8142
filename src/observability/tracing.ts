import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { IncomingHttpHeaders } from 'node:http';

export interface TracingConfig {
  enabled: boolean;
  exporter: 'otlp-http' | 'console';
  /** OTLP/HTTP traces endpoint (JSON encoding). */
  endpoint: string;
  serviceName: string;
  /** Longest wait before a batch of finished spans is exported (ms). */
  batchDelayMs: number;
}

const propagator = new W3CTraceContextPropagator();

/**
 * OpenTelemetry spans for the coordinator: one SERVER span per client request (continuing an
 * incoming W3C `traceparent`), one CLIENT span per engine leg whose context is sent to the engine as
 * `traceparent`. Contexts are passed explicitly (no global context manager, no global provider), so
 * nothing here touches requests when tracing is off.
 */
export class Tracing {
  /** Motor's own provider (shut down by `shutdown`); null with a tracer the caller owns. */
  private readonly provider: BasicTracerProvider | null;
  private readonly tracer: Tracer;

  private constructor(source: { exporter: SpanExporter; cfg: TracingConfig } | { tracer: Tracer }) {
    if ('tracer' in source) {
      this.provider = null;
      this.tracer = source.tracer;
      return;
    }
    const { exporter, cfg } = source;
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': cfg.serviceName }),
      spanProcessors: [
        new BatchSpanProcessor(exporter, { scheduledDelayMillis: Math.max(1, cfg.batchDelayMs) }),
      ],
    });
    this.tracer = this.provider.getTracer('motor');
  }

  /** null when tracing is off. The OTLP exporter is loaded only when configured. */
  static async create(cfg: TracingConfig, exporter?: SpanExporter): Promise<Tracing | null> {
    if (!cfg.enabled) return null;
    if (exporter) return new Tracing({ exporter, cfg });
    if (cfg.exporter === 'console') return new Tracing({ exporter: new ConsoleSpanExporter(), cfg });
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    return new Tracing({ exporter: new OTLPTraceExporter({ url: cfg.endpoint }), cfg });
  }

  /**
   * Spans on an embedding application's tracer (its provider, exporter and resource); the caller
   * owns that provider, so `shutdown` leaves it alone.
   */
  static fromTracer(tracer: Tracer): Tracing {
    return new Tracing({ tracer });
  }

  /** The request span, child of the incoming `traceparent` when there is one. */
  startRequest(
    name: string,
    headers: IncomingHttpHeaders,
    attributes: Attributes,
  ): { span: Span; ctx: Context } {
    const parent = headers.traceparent
      ? propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter)
      : ROOT_CONTEXT;
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    return { span, ctx: trace.setSpan(parent, span) };
  }

  /** A leg span under `parent`; its context is injected into `headers` as `traceparent`. */
  startLeg(parent: Context, name: string, attributes: Attributes, headers: Record<string, string>): Span {
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    propagator.inject(trace.setSpan(parent, span), headers, defaultTextMapSetter);
    return span;
  }

  async shutdown(): Promise<void> {
    await this.provider?.shutdown();
  }
}

/** Ends a span with an error status when `errorCode` is set. */
export function endSpan(span: Span, errorCode: string | null, endTime?: number): void {
  if (errorCode !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode });
  span.end(endTime);
}

/** W3C Trace Context `traceparent`: version, trace id, parent id, flags (lowercase hex, ids not zero). */
const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
/** W3C caps `tracestate` at 32 list members; 512 characters is the size vendors must propagate. */
const TRACESTATE_MAX_CHARS = 512;

/**
 * The caller's trace context as it may be forwarded to engines untouched (tracing off), or null: a
 * malformed `traceparent` is dropped (with its `tracestate`), an oversized `tracestate` alone.
 */
export function forwardableTraceContext(
  traceparent: unknown,
  tracestate: unknown,
): { traceparent: string; tracestate?: string } | null {
  if (typeof traceparent !== 'string' || traceparent.length !== 55 || !TRACEPARENT.test(traceparent))
    return null;
  return typeof tracestate === 'string' && tracestate.length <= TRACESTATE_MAX_CHARS
    ? { traceparent, tracestate }
    : { traceparent };
}
