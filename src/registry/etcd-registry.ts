import {
  Etcd3,
  type DeleteBuilder,
  type IKeyValue,
  type IOptions,
  type Lease,
  type PutBuilder,
  type Watcher,
} from 'etcd3';
import { z } from 'zod';
import {
  applyInstancePatch,
  buildInstanceRecord,
  INSTANCE_STATES,
  instanceRecordSchema,
  leaseTtlMs,
  notFound,
  operatorHoldOf,
  parseRegistration,
  RegistryError,
  type InstanceLease,
  type InstancePatch,
  type InstanceRecord,
  type InstanceRegistration,
  type InstanceState,
  type ParsedRegistration,
} from './instance-record.js';
import {
  RegistryBase,
  type CloseOptions,
  type RegisterOptions,
  type RegistryBaseOptions,
} from './registry.js';

export const DEFAULT_ETCD_PREFIX = '/motor/';

export interface EtcdRegistryOptions extends RegistryBaseOptions {
  /** etcd client URLs, e.g. `http://10.0.0.5:2379`. */
  endpoints: string | string[];
  /** Key prefix shared by every coordinator replica of one deployment. Default `/motor/`. */
  prefix?: string;
  auth?: { username: string; password: string };
  /** Connection timeout for the first call. Default 5000 ms. */
  dialTimeoutMs?: number;
  /** How long a write waits to see itself come back through the watch. Default 5000 ms. */
  syncTimeoutMs?: number;
}

const MAX_CAS_ATTEMPTS = 8;
const OWNER_RETRY_MS = 1000;

interface OwnedRegistration {
  lease: Lease;
  registration: ParsedRegistration;
  options: RegisterOptions;
}

/**
 * The shared store for several coordinator replicas. Records live under
 * `<prefix>instances/<id>` as JSON; the local view is fed by one prefix watch (started at the
 * revision of the initial read, so nothing is missed), which is also how every replica learns of
 * every other replica's changes. Writes are compare-and-swap transactions on the key's
 * mod_revision. Leases are real etcd leases: `owner` leases are kept alive by this object,
 * `heartbeat` leases by `heartbeat(id)` from any replica; an expired lease deletes the key, which
 * every watcher sees as `remove`. An operator's `paused`/`draining` is also kept, without a lease,
 * under `<prefix>state/<id>` (written in the same transaction as the record), so a record that
 * expires and registers again — on any replica, after any restart — gets it back.
 */
export class EtcdRegistry extends RegistryBase {
  readonly kind = 'etcd' as const;
  readonly prefix: string;
  private readonly client: Etcd3;
  private readonly instancesPrefix: string;
  private readonly statePrefix: string;
  private readonly syncTimeoutMs: number;
  private watcher: Watcher | undefined;
  private revision = 0;
  private revisionWaiters: { revision: number; resolve: () => void }[] = [];
  /** etcd lease id ('0' = none) attached to each key, from the latest event. */
  private readonly leaseIds = new Map<string, string>();
  private readonly owned = new Map<string, OwnedRegistration>();
  private closed = false;

  private constructor(options: EtcdRegistryOptions) {
    super(options);
    this.prefix = normalizePrefix(options.prefix ?? DEFAULT_ETCD_PREFIX);
    this.instancesPrefix = `${this.prefix}instances/`;
    this.statePrefix = `${this.prefix}state/`;
    this.syncTimeoutMs = options.syncTimeoutMs ?? 5000;
    const clientOptions: IOptions = {
      hosts: options.endpoints,
      dialTimeout: options.dialTimeoutMs ?? 5000,
    };
    if (options.auth) clientOptions.auth = options.auth;
    this.client = new Etcd3(clientOptions);
  }

  /** Connects, loads the current fleet and starts watching. Rejects if etcd is unreachable. */
  static async create(options: EtcdRegistryOptions): Promise<EtcdRegistry> {
    const registry = new EtcdRegistry(options);
    try {
      await registry.start();
    } catch (err) {
      registry.client.close();
      throw new RegistryError(
        'unavailable',
        `cannot reach etcd at ${String(options.endpoints)}: ${(err as Error).message}`,
      );
    }
    return registry;
  }

  private async start(): Promise<void> {
    const snapshot = await this.client.getAll().prefix(this.instancesPrefix).exec();
    for (const kv of snapshot.kvs) this.ingestPut(kv);
    this.revision = Number(snapshot.header.revision);
    await this.startWatch(this.revision + 1);
  }

  private async startWatch(fromRevision: number): Promise<void> {
    const watcher = await this.client
      .watch()
      .prefix(this.instancesPrefix)
      .startRevision(String(fromRevision))
      .create();
    this.watcher = watcher;
    watcher.on('data', (res) => {
      for (const event of res.events) {
        if (event.type === 'Put') this.ingestPut(event.kv);
        else this.ingestDelete(event.kv);
      }
      this.advanceRevision(Number(res.header.revision));
    });
    watcher.on('disconnected', (err) => this.logger?.warn({ err }, 'etcd watch disconnected; reconnecting'));
    watcher.on('error', (err) => {
      // Not recoverable by the client (e.g. compacted revision): resynchronise from a fresh read.
      this.logger?.error({ err }, 'etcd watch failed; resynchronising');
      void this.resync();
    });
  }

  private async resync(): Promise<void> {
    while (!this.closed) {
      try {
        await this.watcher?.cancel().catch(() => undefined);
        const snapshot = await this.client.getAll().prefix(this.instancesPrefix).exec();
        const seen = new Set<string>();
        for (const kv of snapshot.kvs) seen.add(this.ingestPut(kv) ?? '');
        for (const id of [...this.records.keys()]) if (!seen.has(id)) this.forget(id);
        this.advanceRevision(Number(snapshot.header.revision));
        await this.startWatch(Number(snapshot.header.revision) + 1);
        return;
      } catch (err) {
        this.logger?.warn({ err }, 'etcd resync failed; retrying');
        await sleep(OWNER_RETRY_MS);
      }
    }
  }

  private keyOf(id: string): string {
    return `${this.instancesPrefix}${id}`;
  }

  private stateKeyOf(id: string): string {
    return `${this.statePrefix}${id}`;
  }

  /** The write that leaves the operator's hold for `record` in etcd (delete when `active`). */
  private holdOp(record: InstanceRecord): PutBuilder | DeleteBuilder {
    const hold = operatorHoldOf(record.state);
    const key = this.stateKeyOf(record.id);
    return hold ? this.client.put(key).value(hold) : this.client.delete().key(key);
  }

  /** Applies a put from etcd to the local view; returns the id, or undefined for a corrupt value. */
  private ingestPut(kv: IKeyValue): string | undefined {
    const key = kv.key.toString();
    const id = key.slice(this.instancesPrefix.length);
    const record = decodeRecord(kv.value);
    if (!record || record.id !== id) {
      this.logger?.error({ key }, 'ignoring a corrupt instance record in etcd');
      this.forget(id);
      return undefined;
    }
    this.leaseIds.set(id, kv.lease);
    this.applyPut(record);
    return id;
  }

  private ingestDelete(kv: IKeyValue): void {
    this.forget(kv.key.toString().slice(this.instancesPrefix.length));
  }

  private forget(id: string): void {
    this.leaseIds.delete(id);
    const owned = this.owned.get(id);
    if (owned) {
      // Deleted by someone else (an operator, or expiry): stop renewing a lease that holds nothing.
      this.owned.delete(id);
      owned.lease.revoke().catch(() => undefined);
    }
    this.applyDelete(id);
  }

  private advanceRevision(revision: number): void {
    if (revision <= this.revision) return;
    this.revision = revision;
    const due = this.revisionWaiters.filter((w) => w.revision <= revision);
    this.revisionWaiters = this.revisionWaiters.filter((w) => w.revision > revision);
    for (const waiter of due) waiter.resolve();
  }

  /** Resolves once the watch has delivered `revision` (read-your-writes), or after the sync timeout. */
  private waitForRevision(revision: number): Promise<void> {
    if (this.revision >= revision) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.logger?.warn({ revision, seen: this.revision }, 'etcd watch is lagging behind a write');
        resolve();
      }, this.syncTimeoutMs);
      this.revisionWaiters.push({
        revision,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  register(registration: InstanceRegistration, options: RegisterOptions = {}): Promise<InstanceRecord> {
    return this.guard(() => this.registerInner(registration, options));
  }

  update(id: string, patch: InstancePatch): Promise<InstanceRecord> {
    return this.guard(() => this.updateInner(id, patch));
  }

  remove(id: string): Promise<boolean> {
    return this.guard(() => this.removeInner(id));
  }

  heartbeat(id: string): Promise<boolean> {
    return this.guard(() => this.heartbeatInner(id));
  }

  /** etcd/gRPC failures surface as `RegistryError('unavailable')` (HTTP 503 in the management API). */
  private async guard<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      if (err instanceof RegistryError) throw err;
      throw new RegistryError('unavailable', `etcd request failed: ${(err as Error).message}`);
    }
  }

  private async registerInner(
    registration: InstanceRegistration,
    options: RegisterOptions = {},
  ): Promise<InstanceRecord> {
    this.assertOpen();
    const parsed = parseRegistration(registration);
    const lease: InstanceLease | null = options.lease
      ? { ttl_ms: leaseTtlMs(options.lease.ttlMs), renew: options.lease.renew }
      : null;
    const key = this.keyOf(parsed.id);
    let ownerLease: Lease | undefined;
    let leaseId = '0';
    if (lease?.renew === 'owner') {
      ownerLease = this.client.lease(lease.ttl_ms / 1000);
      leaseId = await ownerLease.grant();
    } else if (lease?.renew === 'heartbeat') {
      leaseId = (await this.client.leaseClient.leaseGrant({ TTL: lease.ttl_ms / 1000 })).ID;
    }
    try {
      for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
        const stateKey = this.stateKeyOf(parsed.id);
        const [current, held] = await Promise.all([
          this.client
            .get(key)
            .exec()
            .then((r) => r.kvs[0]),
          this.client
            .get(stateKey)
            .exec()
            .then((r) => r.kvs[0]),
        ]);
        const existing = current ? decodeRecord(current.value) : undefined;
        const record = buildInstanceRecord(parsed, existing, {
          source: options.source ?? 'api',
          lease,
          nowMs: this.now(),
          hold: held ? decodeHold(held.value) : undefined,
        });
        const put = this.client.put(key).value(JSON.stringify(record));
        if (leaseId !== '0') put.lease(leaseId);
        const txn = await this.client
          .if(key, 'Mod', '==', current ? current.mod_revision : '0')
          .and(stateKey, 'Mod', '==', held ? held.mod_revision : '0')
          .then(put, this.holdOp(record))
          .commit();
        if (!txn.succeeded) continue;
        const previousOwned = this.owned.get(parsed.id);
        this.owned.delete(parsed.id);
        if (previousOwned) previousOwned.lease.revoke().catch(() => undefined);
        if (ownerLease) this.adoptOwnerLease(parsed, options, ownerLease);
        ownerLease = undefined;
        leaseId = '0';
        await this.waitForRevision(Number(txn.header.revision));
        return this.records.get(parsed.id) ?? record;
      }
      throw new RegistryError(
        'conflict',
        `instance ${JSON.stringify(parsed.id)} is being changed concurrently`,
      );
    } finally {
      // A lease granted for a write that did not happen must not linger.
      if (ownerLease) await ownerLease.revoke().catch(() => undefined);
      else if (leaseId !== '0')
        await this.client.leaseClient.leaseRevoke({ ID: leaseId }).catch(() => undefined);
    }
  }

  private adoptOwnerLease(registration: ParsedRegistration, options: RegisterOptions, lease: Lease): void {
    const owned: OwnedRegistration = { lease, registration, options };
    this.owned.set(registration.id, owned);
    lease.on('lost', (err) => {
      if (this.closed || this.owned.get(registration.id) !== owned) return;
      this.owned.delete(registration.id);
      this.logger?.warn({ err, id: registration.id }, 'owner lease lost; registering again');
      void this.reregister(registration, options);
    });
  }

  private async reregister(registration: ParsedRegistration, options: RegisterOptions): Promise<void> {
    while (!this.closed) {
      try {
        await this.register(registration, options);
        return;
      } catch (err) {
        this.logger?.warn({ err, id: registration.id }, 'owner re-registration failed; retrying');
        await sleep(OWNER_RETRY_MS);
      }
    }
  }

  private async updateInner(id: string, patch: InstancePatch): Promise<InstanceRecord> {
    this.assertOpen();
    const key = this.keyOf(id);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const current = (await this.client.get(key).exec()).kvs[0];
      const existing = current ? decodeRecord(current.value) : undefined;
      if (!current || !existing) throw notFound(id);
      const next = applyInstancePatch(existing, patch, this.now());
      const txn = await this.client
        .if(key, 'Mod', '==', current.mod_revision)
        .then(this.client.put(key).value(JSON.stringify(next)).ignoreLease(), this.holdOp(next))
        .commit();
      if (!txn.succeeded) continue;
      await this.waitForRevision(Number(txn.header.revision));
      return this.records.get(id) ?? next;
    }
    throw new RegistryError('conflict', `instance ${JSON.stringify(id)} is being changed concurrently`);
  }

  private async removeInner(id: string): Promise<boolean> {
    this.assertOpen();
    // A deliberate deregistration (e.g. a proxy's drain-then-delete) also ends the operator's hold.
    const key = this.keyOf(id);
    const dropHold = (): DeleteBuilder => this.client.delete().key(this.stateKeyOf(id));
    const res = await this.client
      .if(key, 'Version', '>', 0)
      .then(this.client.delete().key(key), dropHold())
      .else(dropHold())
      .commit();
    await this.waitForRevision(Number(res.header.revision));
    const owned = this.owned.get(id);
    if (owned) {
      this.owned.delete(id);
      await owned.lease.revoke().catch(() => undefined);
    }
    return res.succeeded;
  }

  private async heartbeatInner(id: string): Promise<boolean> {
    this.assertOpen();
    const leaseId = this.leaseIds.get(id);
    if (leaseId === undefined) return false;
    if (leaseId === '0' || this.owned.has(id)) return true;
    const stream = await this.client.leaseClient.leaseKeepAlive();
    try {
      const ttl = await new Promise<number>((resolve, reject) => {
        stream.on('data', (res: { TTL: string }) => resolve(Number(res.TTL)));
        stream.on('error', reject);
        stream.write({ ID: leaseId });
      });
      return ttl > 0;
    } finally {
      stream.end();
    }
  }

  async close(options: CloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.revisionWaiters) waiter.resolve();
    this.revisionWaiters = [];
    await this.watcher?.cancel().catch(() => undefined);
    const owned = [...this.owned.values()];
    this.owned.clear();
    if (options.deregister ?? true) {
      await Promise.all(owned.map((o) => o.lease.revoke().catch(() => undefined)));
    } else {
      // `client.close()` alone does not stop etcd3's keepalive loop; release each lease explicitly.
      for (const o of owned) o.lease.release();
    }
    this.client.close();
    this.clearView();
  }

  private assertOpen(): void {
    if (this.closed) throw new RegistryError('unavailable', 'registry is closed');
  }
}

function decodeHold(value: Buffer): InstanceState | undefined {
  const parsed = z.enum(INSTANCE_STATES).safeParse(value.toString('utf8'));
  return parsed.success ? parsed.data : undefined;
}

function decodeRecord(value: Buffer): InstanceRecord | undefined {
  try {
    const parsed = instanceRecordSchema.safeParse(JSON.parse(value.toString('utf8')));
    return parsed.success ? (parsed.data as InstanceRecord) : undefined;
  } catch {
    return undefined;
  }
}

function normalizePrefix(prefix: string): string {
  const trimmed = prefix.trim();
  if (!trimmed) throw new RegistryError('invalid_instance', 'etcd prefix must not be empty', 'prefix');
  return trimmed.endsWith('/') ? trimmed : `${trimmed}/`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
