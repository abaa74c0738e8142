import type { Logger } from '../common/logger.js';
import type {
  InstancePatch,
  InstanceRecord,
  InstanceRegistration,
  InstanceSource,
  InstanceState,
} from './instance-record.js';

/**
 * A change to the fleet. `add`/`update`/`remove` mirror the store (in etcd: every replica sees every
 * replica's changes). `drained` is local to this Registry object: the instance is `draining` and the
 * work started through this object (`startRequest`) has all finished.
 */
export type RegistryEvent =
  | { type: 'add'; instance: InstanceRecord }
  | { type: 'update'; instance: InstanceRecord; previous: InstanceRecord }
  | { type: 'remove'; instance: InstanceRecord }
  | { type: 'drained'; instance: InstanceRecord };

export type RegistryListener = (event: RegistryEvent) => void;

export interface RegisterOptions {
  /** Default `api`. */
  source?: InstanceSource;
  /**
   * Ties the record to a lease (see `InstanceLease`). Without it the record is permanent until
   * `remove()` — right for static config instances, which every replica registers identically.
   */
  lease?: { ttlMs: number; renew: 'owner' | 'heartbeat' };
}

export interface CloseOptions {
  /**
   * Default true: delete the records whose lease this object owns (graceful deregistration).
   * false: just stop renewing them, as if the process died; they expire after their TTL.
   */
  deregister?: boolean;
}

/**
 * The live set of engine instances. Reads (`list`, `get`, `inFlight`) are synchronous from a local
 * view that the store keeps current (in etcd, through a watch); writes are async and resolve once
 * the local view reflects them (read-your-writes).
 */
export interface Registry {
  readonly kind: 'memory' | 'etcd';
  list(): InstanceRecord[];
  get(id: string): InstanceRecord | undefined;
  /** Upsert. Throws `RegistryError` (`invalid_instance`, with `param`) for a bad registration. */
  register(registration: InstanceRegistration, options?: RegisterOptions): Promise<InstanceRecord>;
  /** Throws `RegistryError('not_found')` for an unknown id. */
  update(id: string, patch: InstancePatch): Promise<InstanceRecord>;
  /** Resolves false when the id was unknown. */
  remove(id: string): Promise<boolean>;
  /** No new work; in-flight work continues. Emits `drained` once this object's in-flight count is 0. */
  drain(id: string): Promise<InstanceRecord>;
  /** No new work until `resume`. */
  pause(id: string): Promise<InstanceRecord>;
  /** Back to `active` (from draining or paused). */
  resume(id: string): Promise<InstanceRecord>;
  /** Renews a `heartbeat` lease. False when the id is unknown (expired): the caller must re-register. */
  heartbeat(id: string): Promise<boolean>;
  /** Subscribes; `replay` first delivers an `add` for every current instance. Returns unsubscribe. */
  watch(listener: RegistryListener, options?: { replay?: boolean }): () => void;

  /**
   * Claims one unit of in-flight work on an instance. Returns an idempotent `done` callback, or
   * `undefined` when the instance is unknown or not `active` (draining/paused) — the atomic check
   * that guarantees a drained instance receives no new work.
   */
  startRequest(id: string): (() => void) | undefined;
  inFlight(id: string): number;
  /** Resolves true once `inFlight(id)` is 0 (at once if already), false after `timeoutMs`. */
  awaitDrained(id: string, timeoutMs?: number): Promise<boolean>;
  close(options?: CloseOptions): Promise<void>;
}

export interface RegistryBaseOptions {
  logger?: Logger;
  /** Defaults to `Date.now`. */
  now?: () => number;
}

/**
 * Local half shared by every store: the instance view, listeners, in-flight accounting and the
 * drained signal. Stores call `applyPut`/`applyDelete` when the underlying data changes.
 */
export abstract class RegistryBase implements Registry {
  abstract readonly kind: 'memory' | 'etcd';
  protected readonly records = new Map<string, InstanceRecord>();
  protected readonly logger: Logger | undefined;
  protected readonly now: () => number;
  private readonly listeners = new Set<RegistryListener>();
  private readonly inflight = new Map<string, number>();
  private readonly drainWaiters = new Map<string, Set<() => void>>();
  private readonly drainedAnnounced = new Set<string>();

  constructor(options: RegistryBaseOptions = {}) {
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
  }

  abstract register(registration: InstanceRegistration, options?: RegisterOptions): Promise<InstanceRecord>;
  abstract update(id: string, patch: InstancePatch): Promise<InstanceRecord>;
  abstract remove(id: string): Promise<boolean>;
  abstract heartbeat(id: string): Promise<boolean>;
  abstract close(options?: CloseOptions): Promise<void>;

  list(): InstanceRecord[] {
    return [...this.records.values()];
  }

  get(id: string): InstanceRecord | undefined {
    return this.records.get(id);
  }

  drain(id: string): Promise<InstanceRecord> {
    return this.setState(id, 'draining');
  }

  pause(id: string): Promise<InstanceRecord> {
    return this.setState(id, 'paused');
  }

  resume(id: string): Promise<InstanceRecord> {
    return this.setState(id, 'active');
  }

  private async setState(id: string, state: InstanceState): Promise<InstanceRecord> {
    const current = this.records.get(id);
    if (current?.state === state) {
      if (state === 'draining') this.announceDrainedIfIdle(id);
      return current;
    }
    return this.update(id, { state });
  }

  watch(listener: RegistryListener, options: { replay?: boolean } = {}): () => void {
    if (options.replay) {
      for (const instance of this.records.values()) this.deliver(listener, { type: 'add', instance });
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  startRequest(id: string): (() => void) | undefined {
    if (this.records.get(id)?.state !== 'active') return undefined;
    this.inflight.set(id, (this.inflight.get(id) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.inflight.get(id) ?? 1) - 1;
      if (left > 0) {
        this.inflight.set(id, left);
        return;
      }
      this.inflight.delete(id);
      const waiters = this.drainWaiters.get(id);
      this.drainWaiters.delete(id);
      for (const resolve of waiters ?? []) resolve();
      this.announceDrainedIfIdle(id);
    };
  }

  inFlight(id: string): number {
    return this.inflight.get(id) ?? 0;
  }

  awaitDrained(id: string, timeoutMs?: number): Promise<boolean> {
    if (this.inFlight(id) === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const onDrained = (): void => {
        if (timer) clearTimeout(timer);
        resolve(true);
      };
      let waiters = this.drainWaiters.get(id);
      if (!waiters) this.drainWaiters.set(id, (waiters = new Set()));
      waiters.add(onDrained);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.drainWaiters.get(id)?.delete(onDrained);
          resolve(false);
        }, timeoutMs);
      }
    });
  }

  /** Records a new or changed instance and tells listeners. Identical content is not an event. */
  protected applyPut(record: InstanceRecord): void {
    const previous = this.records.get(record.id);
    this.records.set(record.id, record);
    if (!previous) this.emit({ type: 'add', instance: record });
    else if (JSON.stringify(previous) !== JSON.stringify(record)) {
      this.emit({ type: 'update', instance: record, previous });
    }
    if (record.state !== 'draining') this.drainedAnnounced.delete(record.id);
    else if (previous?.state !== 'draining') this.announceDrainedIfIdle(record.id);
  }

  protected applyDelete(id: string): void {
    const previous = this.records.get(id);
    if (!previous) return;
    this.records.delete(id);
    this.drainedAnnounced.delete(id);
    this.emit({ type: 'remove', instance: previous });
  }

  /** Forgets the view without events (on close). */
  protected clearView(): void {
    this.records.clear();
    this.listeners.clear();
  }

  private announceDrainedIfIdle(id: string): void {
    const record = this.records.get(id);
    if (!record || record.state !== 'draining' || this.inFlight(id) > 0) return;
    if (this.drainedAnnounced.has(id)) return;
    this.drainedAnnounced.add(id);
    this.emit({ type: 'drained', instance: record });
  }

  private emit(event: RegistryEvent): void {
    for (const listener of [...this.listeners]) this.deliver(listener, event);
  }

  private deliver(listener: RegistryListener, event: RegistryEvent): void {
    try {
      listener(event);
    } catch (err) {
      this.logger?.error({ err, event: event.type, id: event.instance.id }, 'registry listener threw');
    }
  }
}
