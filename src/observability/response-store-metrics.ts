import { Counter, type Registry } from 'prom-client';
import type { ResponseStoreObserver } from '../state/response-store/response-store.js';

/** The response store as Prometheus metrics: lookups (hit / miss), bytes written, errors per operation. */
export class ResponseStoreMetrics implements ResponseStoreObserver {
  private readonly lookups: Counter<'outcome'>;
  private readonly bytes: Counter;
  private readonly writes: Counter;
  private readonly errors: Counter<'op'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.lookups = new Counter({
      name: 'motor_response_store_lookups_total',
      help: 'stored-response reads (retrieve, previous_response_id, item references) by outcome (hit, miss)',
      labelNames: ['outcome'],
      registers,
    });
    this.writes = new Counter({
      name: 'motor_response_store_writes_total',
      help: 'responses stored',
      registers,
    });
    this.bytes = new Counter({
      name: 'motor_response_store_written_bytes_total',
      help: 'JSON bytes of the responses stored',
      registers,
    });
    this.errors = new Counter({
      name: 'motor_response_store_errors_total',
      help: 'response store operations that failed (the backend was unreachable or timed out), by op',
      labelNames: ['op'],
      registers,
    });
  }

  lookup(outcome: 'hit' | 'miss'): void {
    this.lookups.inc({ outcome });
  }

  stored(bytes: number): void {
    this.writes.inc();
    this.bytes.inc(bytes);
  }

  error(op: 'put' | 'get' | 'delete'): void {
    this.errors.inc({ op });
  }
}
