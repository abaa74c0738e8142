import { systemClock, type Clock, type TimerHandle } from '../common/clock.js';
import {
  applyInstancePatch,
  buildInstanceRecord,
  parseRegistration,
  RegistryError,
  leaseTtlMs,
  notFound,
  operatorHoldOf,
  type InstancePatch,
  type InstanceState,
  type InstanceRecord,
  type InstanceRegistration,
} from './instance-record.js';
import {
  RegistryBase,
  type CloseOptions,
  type RegisterOptions,
  type RegistryBaseOptions,
} from './registry.js';

export interface MemoryRegistryOptions extends Omit<RegistryBaseOptions, 'now'> {
  /** Clock and timers for heartbeat-lease expiry (tests inject `ManualClock`). */
  timers?: Clock;
}

/**
 * The embedded store for a single coordinator. `heartbeat` leases expire here when not renewed
 * within their TTL; `owner` leases live as long as this object (the owner is this process).
 */
export class MemoryRegistry extends RegistryBase {
  readonly kind = 'memory' as const;
  private readonly timers: Clock;
  private readonly expiry = new Map<string, TimerHandle>();
  /** Operator state (`paused`/`draining`) by id; outlives lease expiry, not `remove()` or a restart. */
  private readonly holds = new Map<string, InstanceState>();
  private closed = false;

  constructor(options: MemoryRegistryOptions = {}) {
    const timers = options.timers ?? systemClock;
    super({ ...options, now: () => timers.now() });
    this.timers = timers;
  }

  async register(registration: InstanceRegistration, options: RegisterOptions = {}): Promise<InstanceRecord> {
    this.assertOpen();
    const parsed = parseRegistration(registration);
    const lease = options.lease
      ? { ttl_ms: leaseTtlMs(options.lease.ttlMs), renew: options.lease.renew }
      : null;
    const record = buildInstanceRecord(parsed, this.records.get(parsed.id), {
      source: options.source ?? 'api',
      lease,
      nowMs: this.now(),
      hold: this.holds.get(parsed.id),
    });
    this.armExpiry(record);
    this.keepHold(record);
    this.applyPut(record);
    return record;
  }

  async update(id: string, patch: InstancePatch): Promise<InstanceRecord> {
    this.assertOpen();
    const current = this.records.get(id);
    if (!current) throw notFound(id);
    const next = applyInstancePatch(current, patch, this.now());
    this.keepHold(next);
    this.applyPut(next);
    return next;
  }

  async remove(id: string): Promise<boolean> {
    this.assertOpen();
    this.holds.delete(id); // a deliberate deregistration (e.g. a proxy's drain-then-delete) ends the hold
    if (!this.records.has(id)) return false;
    this.disarmExpiry(id);
    this.applyDelete(id);
    return true;
  }

  async heartbeat(id: string): Promise<boolean> {
    this.assertOpen();
    const record = this.records.get(id);
    if (!record) return false;
    this.armExpiry(record);
    return true;
  }

  async close(_options: CloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const handle of this.expiry.values()) this.timers.clearTimeout(handle);
    this.expiry.clear();
    this.holds.clear();
    this.clearView();
  }

  private keepHold(record: InstanceRecord): void {
    const hold = operatorHoldOf(record.state);
    if (hold) this.holds.set(record.id, hold);
    else this.holds.delete(record.id);
  }

  private armExpiry(record: InstanceRecord): void {
    this.disarmExpiry(record.id);
    if (record.lease?.renew !== 'heartbeat') return;
    const handle = this.timers.setTimeout(() => {
      if (this.expiry.get(record.id) !== handle) return;
      this.expiry.delete(record.id);
      this.logger?.warn({ id: record.id, ttlMs: record.lease?.ttl_ms }, 'instance lease expired');
      this.applyDelete(record.id);
    }, record.lease.ttl_ms);
    this.expiry.set(record.id, handle);
  }

  private disarmExpiry(id: string): void {
    const handle = this.expiry.get(id);
    if (handle) this.timers.clearTimeout(handle);
    this.expiry.delete(id);
  }

  private assertOpen(): void {
    if (this.closed) throw new RegistryError('unavailable', 'registry is closed');
  }
}
