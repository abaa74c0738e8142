import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The proxy's own Prometheus metrics (a private registry; no process defaults to clash with the engine's). */
export class ProxyMetrics {
  readonly registry = new Registry();
  readonly dispatches: Counter<'role' | 'leg' | 'outcome'>;
  readonly stops: Counter<'reason' | 'state'>;
  readonly peerStops: Counter<'outcome'>;
  readonly metaserverCalls: Counter<'outcome'>;
  readonly metaserverWait: Histogram<'outcome'>;
  readonly metaserverIdForms: Counter<'form'>;
  readonly passThrough: Counter<'route'>;
  readonly peerRefused: Counter<'use'>;
  readonly unauthenticated: Counter<'route'>;

  constructor(gauges: {
    active: () => number;
    tracked: () => number;
    prepared: () => number;
    waiting: () => number;
  }) {
    const registers = [this.registry];
    this.dispatches = new Counter({
      name: 'motor_proxy_dispatches_total',
      help: 'Requests with a _motor_dispatch envelope, by envelope role, leg and outcome',
      labelNames: ['role', 'leg', 'outcome'],
      registers,
    });
    this.stops = new Counter({
      name: 'motor_proxy_stops_total',
      help: 'POST /v1/dispatch/stop calls, by normalised reason and answered state',
      labelNames: ['reason', 'state'],
      registers,
    });
    this.peerStops = new Counter({
      name: 'motor_proxy_peer_stops_total',
      help: 'Stops this proxy sent to its peer on its own failure (sent, refused by --peer-allow, failed)',
      labelNames: ['outcome'],
      registers,
    });
    this.metaserverCalls = new Counter({
      name: 'motor_proxy_metaserver_calls_total',
      help: 'POST /v1/metaserver calls by outcome',
      labelNames: ['outcome'],
      registers,
    });
    this.metaserverWait = new Histogram({
      name: 'motor_proxy_metaserver_wait_seconds',
      help: 'Time a metaserver call waited for its prepared prefill (0 when it was already there)',
      labelNames: ['outcome'],
      buckets: [0, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10],
      registers,
    });
    this.metaserverIdForms = new Counter({
      name: 'motor_proxy_metaserver_id_forms_total',
      help: "Metaserver calls matched to a prepared prefill, by how vLLM spelled the request id (bare, chat, chat_suffixed, completions, completions_suffixed): the connectors' release family",
      labelNames: ['form'],
      registers,
    });
    this.peerRefused = new Counter({
      name: 'motor_proxy_peer_refused_total',
      help: 'Peer URLs from an envelope refused because they are not in --peer-allow, by use (stop, bootstrap_info, metaserver)',
      labelNames: ['use'],
      registers,
    });
    this.unauthenticated = new Counter({
      name: 'motor_proxy_unauthenticated_total',
      help: 'Calls refused 401 for a missing or wrong x-motor-peer-secret, by route (dispatch, stop, pass_through)',
      labelNames: ['route'],
      registers,
    });
    this.passThrough = new Counter({
      name: 'motor_proxy_pass_through_total',
      help: 'Requests without an envelope forwarded unchanged to the engine',
      labelNames: ['route'],
      registers,
    });
    const gauge = (name: string, help: string, read: () => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    };
    gauge('motor_proxy_attempts_active', 'Attempts in flight on this engine', gauges.active);
    gauge(
      'motor_proxy_attempts_tracked',
      'Finished attempts and tombstones remembered for stops',
      gauges.tracked,
    );
    gauge(
      'motor_proxy_prepared_prefills',
      'Trigger prefills prepared and waiting for their metaserver call',
      gauges.prepared,
    );
    gauge('motor_proxy_metaserver_waiting', 'Metaserver calls waiting for a late prepare', gauges.waiting);
  }
}
