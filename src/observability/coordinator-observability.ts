import type { Tracer } from '@opentelemetry/api';
import type { KvEventsHealth } from '../kv-events/kv-events-hub.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import type { CircuitStateProvider, InstanceView } from './coordinator-metrics.js';
import { Observability } from './observability.js';
import { createObservabilityRoutes } from './observability-routes.js';
import { Tracing } from './tracing.js';

export interface CoordinatorObservability {
  observability: Observability;
  /** The gateway's extra routes: `/metrics`, `/dashboard`, `/dashboard/api/state`. */
  routes: (req: IncomingMessage, res: ServerResponse, method: string, path: string) => boolean;
  close(): Promise<void>;
}

export interface ObservabilityProviders {
  /** Circuit-breaker state per instance (from the scheduling layer). */
  circuitStates?: CircuitStateProvider;
  /** Requests waiting for admission. */
  queuedRequests?: () => number;
  /** Request-body bytes admission counts now. */
  inflightBodyBytes?: () => number;
  /** KV block index health for the dashboard (null: no instance publishes KV events). */
  kvEvents?: () => KvEventsHealth | null;
}

/** What an embedding application brings instead of Motor's own (docs/library.md). */
export interface InjectedObservability {
  /** Motor's metrics are registered here (default: a registry of its own). */
  registry?: Registry;
  /** Spans go to this tracer, whatever `observability.tracing` says (default: per the config). */
  tracer?: Tracer;
}

/** The fleet as observability reads it (the coordinator's `InstanceSource` fits). */
export interface ObservedFleet {
  /** Every known instance. */
  all(): readonly { id: string; role: string; url: string; inFlight: number }[];
  /** The instances that may receive new work now. */
  routable(): readonly { id: string }[];
}

/** The fleet as metrics and the dashboard see it: ids, roles, load and routability only. */
export function instanceViews(source: ObservedFleet): () => InstanceView[] {
  return () => {
    const routable = new Set(source.routable().map((i) => i.id));
    return source.all().map((i) => ({
      id: i.id,
      role: i.role,
      url: i.url,
      inFlight: i.inFlight,
      routable: routable.has(i.id),
    }));
  };
}

/** Metrics, tracing, access log and dashboard for one coordinator, from `config.observability`. */
export async function createCoordinatorObservability(
  config: CoordinatorConfig,
  log: Logger,
  source: ObservedFleet,
  providers: ObservabilityProviders = {},
  injected: InjectedObservability = {},
): Promise<CoordinatorObservability> {
  const cfg = config.observability;
  const tracing = injected.tracer ? Tracing.fromTracer(injected.tracer) : await Tracing.create(cfg.tracing);
  if (tracing && !injected.tracer)
    log.info({ exporter: cfg.tracing.exporter, endpoint: cfg.tracing.endpoint }, 'tracing on');
  const instances = instanceViews(source);
  const observability = Observability.create(
    log,
    {
      instances,
      circuitStates: providers.circuitStates,
      queuedRequests: providers.queuedRequests,
      inflightBodyBytes: providers.inflightBodyBytes,
    },
    {
      tracing,
      recentRequests: cfg.recentRequests,
      accessLog: cfg.accessLog,
      ...(injected.registry ? { registry: injected.registry } : {}),
    },
  );
  const routes = createObservabilityRoutes(
    observability,
    { instances, circuitStates: providers.circuitStates, kvEvents: providers.kvEvents },
    {
      metrics: cfg.metrics,
      dashboard: cfg.dashboard,
      apiKeys: cfg.requireApiKey ? config.server.apiKeys : undefined,
    },
  );
  return { observability, routes, close: () => observability.close() };
}
