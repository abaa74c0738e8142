import { Counter, Gauge, type Registry } from 'prom-client';
import type { RoutingSyncStats } from '../state/routing-sync/index.js';

/**
 * Shared routing state (`routingSync`) as Prometheus metrics, read from the sync's counters at scrape
 * time: nothing is added to the request path. A bus outage shows as `motor_routing_sync_up` 0 and a
 * growing `motor_routing_sync_ops_dropped_total`.
 */
export function registerRoutingSyncMetrics(registry: Registry, stats: () => RoutingSyncStats): void {
  const registers = [registry];
  const counter = (name: string, help: string, read: (s: RoutingSyncStats) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read(stats()));
      },
    });
  const gauge = (name: string, help: string, read: (s: RoutingSyncStats) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(stats()));
      },
    });
  gauge('motor_routing_sync_up', '1 while the routing-state bus (Redis) is reachable', (s) =>
    s.connected ? 1 : 0,
  );
  gauge('motor_routing_sync_peers', 'other coordinator replicas heard from on the bus', (s) => s.peers);
  gauge(
    'motor_routing_sync_warm_started',
    '1 once start-up loaded the other replicas state (0: alone, bus down, timed out or pending)',
    (s) => (s.warmStart === 'loaded' ? 1 : 0),
  );
  counter(
    'motor_routing_sync_ops_published_total',
    'routing decisions (index records, load begin/prefilled/end, expected KV blocks) sent to the other replicas',
    (s) => s.opsSent,
  );
  counter(
    'motor_routing_sync_ops_applied_total',
    'routing decisions received from the other replicas and applied here',
    (s) => s.opsReceived,
  );
  counter(
    'motor_routing_sync_ops_dropped_total',
    'routing decisions not sent because the bus was unreachable (this replica routed on its own state)',
    (s) => s.opsDropped,
  );
  counter(
    'motor_routing_sync_messages_rejected_total',
    'bus messages refused (malformed, oversized, another version)',
    (s) => s.messagesRejected,
  );
  counter(
    'motor_routing_sync_gaps_total',
    'lost broadcasts noticed (each answered by a state exchange with the sender)',
    (s) => s.gaps,
  );
  counter(
    'motor_routing_sync_states_received_total',
    'state answers received from other replicas (warm start, back after an outage, after a gap)',
    (s) => s.statesReceived,
  );
  counter('motor_routing_sync_outages_total', 'times the bus became unreachable', (s) => s.outages);
  counter('motor_routing_sync_sent_bytes_total', 'bytes published on the bus', (s) => s.bytesSent);
}
