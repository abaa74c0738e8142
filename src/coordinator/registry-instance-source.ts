import type { Logger } from '../common/logger.js';
import type { ResolvedInstance } from '../config/coordinator-config.js';
import type { DispatchProfile } from '../protocol/index.js';
import type { HealthProber, InstanceRecord, InstanceRegistration, Registry } from '../registry/index.js';
import type { Instance, InstanceSource } from './instance-source.js';

/** Label an instance may carry to name its SGLang bootstrap port (default: its URL port). */
export const BOOTSTRAP_PORT_LABEL = 'bootstrap_port';

/** A static config instance as a registry registration (source `static`, no lease). */
export function registrationFromConfig(instance: ResolvedInstance): InstanceRegistration {
  return {
    id: instance.id,
    role: instance.role,
    url: instance.url,
    engine: instance.engine,
    mode: instance.mode,
    dispatch_capabilities: [...instance.dispatchCapabilities],
    models: [...instance.models],
    labels:
      instance.bootstrapPort !== undefined ? { [BOOTSTRAP_PORT_LABEL]: String(instance.bootstrapPort) } : {},
  };
}

/** The dispatch profile of a record whose capabilities were given explicitly (as the config does it). */
function profileOf(record: InstanceRecord): DispatchProfile {
  if (record.dispatch_profile !== null) return record.dispatch_profile;
  if (record.dispatch_capabilities.includes('concurrent_engine_sync'))
    return record.engine === 'sglang' ? 'bootstrap' : 'trigger';
  if (record.dispatch_capabilities.includes('prefill_handoff_decode')) return 'handoff';
  return 'unknown';
}

export interface RegistryInstanceSourceOptions {
  registry: Registry;
  health: HealthProber;
  /** The config's instances: their profile and envelope `instance_id` (index) are kept. */
  staticInstances?: readonly ResolvedInstance[];
  /** Called with the URL of an instance that is gone (and no other instance shares its origin). */
  onOriginUnused?: (url: string) => void;
  log?: Logger;
}

/**
 * The coordinator's view of the registry: one long-lived `Instance` object per registered id
 * (updated in place, so the dispatcher's in-flight counters survive updates), the routable set
 * (active, not draining or paused, healthy — recomputed only after a registry or health change),
 * per-leg claims through `registry.startRequest` and passive health signals.
 */
export class RegistryInstanceSource implements InstanceSource {
  private readonly registry: Registry;
  private readonly health: HealthProber;
  private readonly byId = new Map<string, Instance>();
  private readonly staticById: Map<string, ResolvedInstance>;
  private readonly onOriginUnused: ((url: string) => void) | undefined;
  private nextIndex: number;
  private routableCache: Instance[] | null = null;
  private allCache: Instance[] | null = null;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(options: RegistryInstanceSourceOptions) {
    this.registry = options.registry;
    this.health = options.health;
    this.onOriginUnused = options.onOriginUnused;
    this.staticById = new Map((options.staticInstances ?? []).map((i) => [i.id, i]));
    this.nextIndex = options.staticInstances?.length ?? 0;
    this.unsubscribe.push(
      this.registry.watch(
        (event) => {
          if (event.type === 'add' || event.type === 'update') this.upsert(event.instance);
          else if (event.type === 'remove') this.delete(event.instance);
          this.invalidate();
        },
        { replay: true },
      ),
      this.health.onChange(() => this.invalidate()),
    );
  }

  routable(): readonly Instance[] {
    if (this.routableCache === null) {
      const out: Instance[] = [];
      for (const instance of this.byId.values()) {
        if (this.health.isRoutable(instance.id)) out.push(instance);
      }
      this.routableCache = out;
    }
    return this.routableCache;
  }

  all(): readonly Instance[] {
    this.allCache ??= [...this.byId.values()];
    return this.allCache;
  }

  get(id: string): Instance | undefined {
    return this.byId.get(id);
  }

  acquire(instance: Instance): (() => void) | undefined {
    return this.registry.startRequest(instance.id);
  }

  reportSuccess(instance: Instance): void {
    this.health.reportSuccess(instance.id);
  }

  reportFailure(instance: Instance, error: string): void {
    this.health.reportFailure(instance.id, error);
  }

  close(): void {
    for (const off of this.unsubscribe.splice(0)) off();
  }

  private invalidate(): void {
    this.routableCache = null;
    this.allCache = null;
  }

  private upsert(record: InstanceRecord): void {
    const existing = this.byId.get(record.id);
    const configured = record.source === 'static' ? this.staticById.get(record.id) : undefined;
    const bootstrap = Number(record.labels[BOOTSTRAP_PORT_LABEL]);
    const fields: Omit<Instance, 'inFlight'> = {
      id: record.id,
      index: configured?.index ?? existing?.index ?? this.indexFor(record.id),
      url: record.url,
      role: record.role,
      mode: record.mode,
      engine: record.engine,
      models: [...record.models],
      dispatchCapabilities: [...record.dispatch_capabilities],
      profile:
        configured && record.dispatch_profile === null && sameSet(configured, record)
          ? configured.profile
          : profileOf(record),
      ...(Number.isInteger(bootstrap) && bootstrap > 0 && bootstrap < 65536
        ? { bootstrapPort: bootstrap }
        : {}),
    };
    if (!existing) {
      this.byId.set(record.id, { ...fields, inFlight: 0 });
      return;
    }
    const oldUrl = existing.url;
    delete existing.bootstrapPort;
    Object.assign(existing, fields);
    if (oldUrl !== existing.url) this.releaseIfUnused(oldUrl);
  }

  private delete(record: InstanceRecord): void {
    const existing = this.byId.get(record.id);
    if (!existing) return;
    this.byId.delete(record.id);
    this.releaseIfUnused(existing.url);
  }

  private releaseIfUnused(url: string): void {
    if (!this.onOriginUnused) return;
    const origin = new URL(url).origin;
    for (const other of this.byId.values()) if (new URL(other.url).origin === origin) return;
    this.onOriginUnused(url);
  }

  /** The envelope's numeric `instance_id`: the seed's integer id when the id is one, else a counter. */
  private indexFor(id: string): number {
    return /^\d{1,9}$/.test(id) ? Number(id) : this.nextIndex++;
  }
}

function sameSet(configured: ResolvedInstance, record: InstanceRecord): boolean {
  const a = [...configured.dispatchCapabilities].sort().join(',');
  const b = [...record.dispatch_capabilities].sort().join(',');
  return a === b && configured.engine === record.engine;
}
