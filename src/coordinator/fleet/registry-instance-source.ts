import type { Logger } from '../../common/logger.js';
import type { ResolvedInstance } from '../../config/coordinator-config.js';
import type { DispatchPlan, DispatchProfile, EngineKind } from '../../protocol/index.js';
import type { HealthProber, InstanceRecord, InstanceRegistration, Registry } from '../../registry/index.js';
import { resolveSglangBootstrapPort, urlPort } from '../../engine-adapters/sglang-server-info.js';
import type { DiscoveryOutcome } from './discovery-reconcile.js';
import type { InstanceDiscovery } from './instance-discovery.js';
import type { Instance, InstanceSource } from './instance-source.js';

/** Label an instance may carry to name its SGLang bootstrap port (direct mode default: 8998). */
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
    ...(instance.kvEvents !== undefined ? { kv_events: instance.kvEvents } : {}),
  };
}

/** The dispatch profile of capabilities given explicitly (as the config does it). */
export function profileFromCapabilities(plans: readonly DispatchPlan[], engine: EngineKind): DispatchProfile {
  if (plans.includes('concurrent_engine_sync')) return engine === 'sglang' ? 'bootstrap' : 'trigger';
  if (plans.includes('prefill_handoff_decode')) return 'handoff';
  return 'unknown';
}

function profileOf(record: InstanceRecord): DispatchProfile {
  return record.dispatch_profile ?? profileFromCapabilities(record.dispatch_capabilities, record.engine);
}

export interface RegistryInstanceSourceOptions {
  registry: Registry;
  health: HealthProber;
  /** The config's instances: their profile and envelope `instance_id` (index) are kept. */
  staticInstances?: readonly ResolvedInstance[];
  /** Called with the URL of an instance that is gone (and no other instance shares its origin). */
  onOriginUnused?: (url: string) => void;
  /** What static instances reported about themselves; blocked ones are not routable. */
  discovery?: InstanceDiscovery;
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
  private readonly discovery: InstanceDiscovery | undefined;
  private nextIndex: number;
  private routableCache: Instance[] | null = null;
  private allCache: Instance[] | null = null;
  private problemsCache: Record<string, string> | null = null;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(options: RegistryInstanceSourceOptions) {
    this.registry = options.registry;
    this.health = options.health;
    this.onOriginUnused = options.onOriginUnused;
    this.discovery = options.discovery;
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
    if (this.discovery)
      this.unsubscribe.push(
        this.discovery.onChange((id) => {
          const record = this.registry.get(id);
          if (record) this.upsert(record);
          this.invalidate();
        }),
      );
  }

  routable(): readonly Instance[] {
    if (this.routableCache === null) {
      const out: Instance[] = [];
      for (const instance of this.byId.values()) {
        if (this.health.isRoutable(instance.id) && !this.blocked(instance.id)) out.push(instance);
      }
      this.routableCache = out;
    }
    return this.routableCache;
  }

  all(): readonly Instance[] {
    this.allCache ??= [...this.byId.values()];
    return this.allCache;
  }

  problems(): Readonly<Record<string, string>> {
    if (this.problemsCache === null) {
      const out: Record<string, string> = {};
      for (const id of this.byId.keys()) {
        const outcome = this.outcomeOf(id);
        if (!outcome) continue;
        const lines = outcome.blocked !== null ? [`not scheduled: ${outcome.blocked}`] : [];
        lines.push(...outcome.notes);
        if (lines.length > 0) out[id] = lines.join('; ');
      }
      this.problemsCache = out;
    }
    return this.problemsCache;
  }

  unroutableReason(instance: Instance): string {
    const record = this.registry.get(instance.id);
    if (!record) return 'removed';
    if (record.state !== 'active') return record.state;
    if (this.blocked(instance.id)) return 'held out by discovery';
    const status = this.health.health(instance.id)?.status;
    if (status === 'unhealthy') return 'unhealthy';
    if (status !== 'healthy') return 'not health-checked yet';
    return 'not routable';
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
    this.problemsCache = null;
  }

  /** Discovery speaks only for the config's instances, while they are still the config's record. */
  private outcomeOf(id: string): DiscoveryOutcome | undefined {
    return this.registry.get(id)?.source === 'static' ? this.discovery?.outcome(id) : undefined;
  }

  private blocked(id: string): boolean {
    return (this.outcomeOf(id)?.blocked ?? null) !== null;
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
      ...(configured?.kvConnector !== undefined ? { kvConnector: configured.kvConnector } : {}),
      ...(Number.isInteger(bootstrap) && bootstrap > 0 && bootstrap < 65536
        ? { bootstrapPort: bootstrap }
        : {}),
      ...(record.kv_events !== null ? { kvEvents: record.kv_events } : {}),
    };
    const found = record.source === 'static' ? this.discovery?.outcome(record.id) : undefined;
    if (found) applyOutcome(fields, found);
    if (fields.mode === 'direct' && fields.engine === 'sglang' && fields.bootstrapPort === undefined)
      fields.bootstrapPort = resolveSglangBootstrapPort(null, null, {
        port: urlPort(fields.url),
        onHttpPort: configured?.bootstrapOnHttpPort === true,
      }).port;
    if (!existing) {
      this.byId.set(record.id, { ...fields, inFlight: 0 });
      return;
    }
    const oldUrl = existing.url;
    delete existing.bootstrapPort;
    delete existing.kvConnector;
    delete existing.reportedModels;
    delete existing.kvEvents;
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

/** Discovered values fill what the config left open (the outcome already let configured values win). */
function applyOutcome(fields: Omit<Instance, 'inFlight'>, outcome: DiscoveryOutcome): void {
  if (outcome.engine !== undefined) fields.engine = outcome.engine;
  if (outcome.dispatchCapabilities !== undefined)
    fields.dispatchCapabilities = [...outcome.dispatchCapabilities];
  if (outcome.profile !== undefined) fields.profile = outcome.profile;
  if (outcome.kvConnector !== undefined) fields.kvConnector = outcome.kvConnector;
  if (outcome.bootstrapPort !== undefined) fields.bootstrapPort = outcome.bootstrapPort;
  if (outcome.reportedModels.length > 0) fields.reportedModels = outcome.reportedModels;
}

function sameSet(configured: ResolvedInstance, record: InstanceRecord): boolean {
  const a = [...configured.dispatchCapabilities].sort().join(',');
  const b = [...record.dispatch_capabilities].sort().join(',');
  return a === b && configured.engine === record.engine;
}
