import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ERROR_CODES } from '../common/motor-error.js';

/** One instance as the metrics and the dashboard see it (never request data). */
export interface InstanceView {
  id: string;
  role: string;
  url: string;
  /** Open legs on this instance. */
  inFlight: number;
  /** Whether the instance may receive new work now. */
  routable: boolean;
}

export type CircuitState = 'closed' | 'open' | 'half_open';

/** Per-instance circuit-breaker states, supplied by the scheduling layer (none until it is wired). */
export type CircuitStateProvider = () => Iterable<{ instanceId: string; state: CircuitState }>;

export interface MetricsSources {
  instances: () => Iterable<InstanceView>;
  circuitStates?: CircuitStateProvider;
  /** Requests waiting for admission (none until admission control exists). */
  queuedRequests?: () => number;
  /** Request-body bytes admission counts now (`server.maxInflightBodyBytes`). */
  inflightBodyBytes?: () => number;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const ITL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

const CIRCUIT_STATES: readonly CircuitState[] = ['closed', 'open', 'half_open'];
/** Error codes kept as metric label values: MotorError's codes; any other code is counted as `other`. */
const KNOWN_CODES: ReadonlySet<string> = new Set(Object.keys(ERROR_CODES));
const KNOWN_ROUTES: ReadonlySet<string> = new Set(['/v1/chat/completions', '/v1/completions']);
const KNOWN_FLOWS: ReadonlySet<string> = new Set([
  'handoff',
  'trigger',
  'bootstrap',
  'single',
  'single_degraded',
  'none',
]);

/** Label values from a fixed set only: anything else becomes `other` (cardinality stays bounded). */
export const boundedCode = (code: string): string => (KNOWN_CODES.has(code) ? code : 'other');
export const boundedRoute = (path: string): string => (KNOWN_ROUTES.has(path) ? path : 'other');
export const boundedFlow = (flow: string): string => (KNOWN_FLOWS.has(flow) ? flow : 'other');

/**
 * The coordinator's Prometheus metrics, on a Registry of its own (not prom-client's global one, so
 * several coordinators in one process — tests — never share counters). Labels carry only fixed
 * enums and instance ids (bounded by the fleet), never request ids or user input.
 */
export class CoordinatorMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'route' | 'plan' | 'outcome'>;
  readonly requestDuration: Histogram<'route' | 'plan'>;
  readonly ttft: Histogram<'route' | 'plan'>;
  readonly itl: Histogram<'plan'>;
  readonly prefillDuration: Histogram<'plan'>;
  readonly handoffDuration: Histogram<'plan'>;
  readonly streamFrames: Counter;
  readonly retries: Counter<'code'>;
  readonly attemptFailures: Counter<'code' | 'reason'>;
  readonly stops: Counter<'reason' | 'result'>;
  readonly decisions: Counter<'kind' | 'plan'>;
  readonly prefillKvSkipped: Counter<'instance' | 'reason'>;
  readonly kvLoad: Counter<'prefill' | 'decode' | 'verdict'>;
  readonly migrations: Counter<'reason' | 'outcome'>;
  readonly migrationResume: Histogram;
  readonly inFlight: Gauge;
  /** Client connections shed by the gateway's listener (`ShedReason`, common/server-limits.ts). */
  readonly connectionsShed: Counter<'reason'>;

  /**
   * `registry`: an embedding application's own (its metrics and Motor's on one `/metrics`); Node's
   * default process metrics are then left to it unless `defaultMetrics` is true.
   */
  constructor(sources: MetricsSources, opts: { defaultMetrics?: boolean; registry?: Registry } = {}) {
    this.registry = opts.registry ?? new Registry();
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'motor_requests_total',
      help: 'Client requests by API route, dispatch plan of the last attempt, and outcome (ok or error code)',
      labelNames: ['route', 'plan', 'outcome'],
      registers,
    });
    this.requestDuration = new Histogram({
      name: 'motor_request_duration_seconds',
      help: 'End-to-end request duration as seen by the coordinator (retries included)',
      labelNames: ['route', 'plan'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.ttft = new Histogram({
      name: 'motor_ttft_seconds',
      help: 'Time to first token of stream requests, request arrival to first content frame, across prefill and decode',
      labelNames: ['route', 'plan'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.itl = new Histogram({
      name: 'motor_inter_token_latency_seconds',
      help: 'Mean gap between SSE frames after the first, one observation per stream request',
      labelNames: ['plan'],
      buckets: ITL_BUCKETS,
      registers,
    });
    this.prefillDuration = new Histogram({
      name: 'motor_prefill_duration_seconds',
      help: 'Prefill leg duration: request sent to the prefill instance until its answer was read',
      labelNames: ['plan'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.handoffDuration = new Histogram({
      name: 'motor_kv_handoff_duration_seconds',
      help: 'KV handoff: prefill answer received until the first byte of the decode stream',
      labelNames: ['plan'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.streamFrames = new Counter({
      name: 'motor_stream_frames_total',
      help: 'SSE frames relayed to clients (about one per token)',
      registers,
    });
    this.retries = new Counter({
      name: 'motor_retries_total',
      help: 'New attempts started after a failed one, by the failure code',
      labelNames: ['code'],
      registers,
    });
    this.attemptFailures = new Counter({
      name: 'motor_attempt_failures_total',
      help: 'Failed attempts by error code and the stop reason sent to their legs',
      labelNames: ['code', 'reason'],
      registers,
    });
    this.stops = new Counter({
      name: 'motor_stops_total',
      help: 'Stops sent to instances (/v1/dispatch/stop, or connection close in direct mode) by reason and result',
      labelNames: ['reason', 'result'],
      registers,
    });
    this.decisions = new Counter({
      name: 'motor_scheduling_decisions_total',
      help: 'Routes chosen per attempt: kind pd (prefill+decode pair) or single (union / decode-only / degraded), by plan',
      labelNames: ['kind', 'plan'],
      registers,
    });
    this.kvLoad = new Counter({
      name: 'motor_kv_load_total',
      help:
        "P/D requests by whether the decode loaded the prompt's KV, judged from the decode's own usage " +
        '(verdict loaded: cached_tokens at least half the prompt; not_loaded: it recomputed the prompt, a ' +
        'silent P/D failure; unknown: the engine reports no cached tokens), per prefill/decode pair',
      labelNames: ['prefill', 'decode', 'verdict'],
      registers,
    });
    this.prefillKvSkipped = new Counter({
      name: 'motor_prefill_kv_skipped_total',
      help:
        'Handoff prefills whose KV the decode did not read: the prefill engine returned no kv_transfer_params ' +
        '(reason no_kv_params: an EOS/stop-ended prefill, or a connector not set up for P/D) or the handoff ' +
        'expired before the decode started (reason expired); the decode recomputed the prompt',
      labelNames: ['instance', 'reason'],
      registers,
    });
    this.migrations = new Counter({
      name: 'motor_migrations_total',
      help:
        'In-flight migrations of committed streams (docs/migration.md) by the failure code that caused them ' +
        'and outcome: started, resumed (the continuation reached the client), refused, exhausted',
      labelNames: ['reason', 'outcome'],
      registers,
    });
    this.migrationResume = new Histogram({
      name: 'motor_migration_resume_seconds',
      help: 'Failure of a committed leg to the continuation’s first token at the client',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.inFlight = new Gauge({
      name: 'motor_requests_in_flight',
      help: 'Client requests being served now',
      registers,
    });
    this.connectionsShed = new Counter({
      name: 'motor_connections_shed_total',
      help: 'Client connections shed under a flood: per_source, idle_evicted, cap, reserve_only',
      labelNames: ['reason'],
      registers,
    });
    new Gauge({
      name: 'motor_requests_queued',
      help: 'Client requests waiting for admission',
      registers,
      collect() {
        this.set(sources.queuedRequests?.() ?? 0);
      },
    });
    new Gauge({
      name: 'motor_request_body_bytes_in_flight',
      help: 'Request-body bytes admitted and not yet released (budget: server.maxInflightBodyBytes)',
      registers,
      collect() {
        this.set(sources.inflightBodyBytes?.() ?? 0);
      },
    });
    new Gauge({
      name: 'motor_instance_in_flight',
      help: 'Open legs per instance (the load the scheduler sees)',
      labelNames: ['instance', 'role'],
      registers,
      collect() {
        this.reset();
        for (const i of sources.instances()) this.set({ instance: i.id, role: i.role }, i.inFlight);
      },
    });
    new Gauge({
      name: 'motor_instance_routable',
      help: '1 when the instance may receive new work (registered, healthy, not drained), else 0',
      labelNames: ['instance', 'role'],
      registers,
      collect() {
        this.reset();
        for (const i of sources.instances()) this.set({ instance: i.id, role: i.role }, i.routable ? 1 : 0);
      },
    });
    new Gauge({
      name: 'motor_instance_circuit_state',
      help: 'Circuit breaker state per instance: 1 on the current state (closed, open, half_open)',
      labelNames: ['instance', 'state'],
      registers,
      collect() {
        this.reset();
        if (!sources.circuitStates) return;
        for (const { instanceId, state } of sources.circuitStates()) {
          for (const s of CIRCUIT_STATES) this.set({ instance: instanceId, state: s }, s === state ? 1 : 0);
        }
      },
    });
    if (opts.defaultMetrics ?? opts.registry === undefined)
      collectDefaultMetrics({ register: this.registry });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
