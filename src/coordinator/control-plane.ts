import type { Logger } from '../common/logger.js';
import type { CoordinatorConfig } from '../config/coordinator-config.js';
import {
  createManagementHandler,
  createRegistry,
  HealthProber,
  instanceUrlRefusal,
  registerStaticInstances,
  startManagementServer,
  type ManagementApiOptions,
  type ManagementHandler,
  type ManagementServer,
  type Registry,
  type RegistryConfig,
} from '../registry/index.js';
import { httpJsonGetter } from './fleet/discovery-probe.js';
import { InstanceDiscovery } from './fleet/instance-discovery.js';
import { RegistryInstanceSource, registrationFromConfig } from './fleet/registry-instance-source.js';
import { servedModels } from './scheduling-bridge/route.js';
import type { Upstreams } from './fleet/upstream.js';

export interface ManagementProviders {
  load?: (id: string) => unknown;
  circuit?: (id: string) => unknown;
  /** The gateway's bound port: instance URLs naming it (or the management port) are refused. */
  gatewayPort?: () => number | null;
  /** Extra management routes (`GET /v1/doctor`). */
  extraRoutes?: ManagementApiOptions['extraRoutes'];
}

/** The coordinator's registry, health prober and management API, wired together. */
export interface ControlPlane {
  registry: Registry;
  health: HealthProber;
  source: RegistryInstanceSource;
  /** What the config's instances report about themselves (docs/coordinator.md "Discovery"). */
  discovery: InstanceDiscovery;
  /**
   * Serves the management API on `management.port` (no-op when it is null); logs `listening` with
   * `server: "management"`. `load` and `circuit` fill the views' fields of the same names.
   */
  startManagement(providers?: ManagementProviders): Promise<ManagementServer | null>;
  /** The same management API as a request listener, for an application to mount where it wants. */
  managementHandler(providers?: ManagementProviders): ManagementHandler;
  close(): Promise<void>;
}

function registryConfig(config: CoordinatorConfig): RegistryConfig {
  const r = config.registry;
  if (r.store === 'memory') return { store: 'memory' };
  return {
    store: 'etcd',
    endpoints: r.endpoints,
    prefix: r.prefix,
    dialTimeoutMs: r.dialTimeoutMs,
    ...(r.auth ? { auth: r.auth } : {}),
  };
}

/**
 * Opens the registry (memory or etcd), loads the config's static instances into it, starts health
 * probes and probes every known instance once (bounded by `health.timeoutMs`) so a coordinator
 * started after its engines routes from its first request.
 */
export async function startControlPlane(
  config: CoordinatorConfig,
  log: Logger,
  upstreams: Upstreams,
): Promise<ControlPlane> {
  const registry = await createRegistry(registryConfig(config), { logger: log });
  let health: HealthProber | undefined;
  let source: RegistryInstanceSource | undefined;
  let discovery: InstanceDiscovery | undefined;
  const getter = httpJsonGetter();
  try {
    await registerStaticInstances(registry, config.instances.map(registrationFromConfig));
    const h = config.health;
    health = new HealthProber(registry, {
      intervalMs: h.intervalMs,
      timeoutMs: h.timeoutMs,
      unhealthyAfter: h.unhealthyAfter,
      healthyAfter: h.healthyAfter,
      path: h.path,
      logger: log,
    });
    discovery = new InstanceDiscovery({
      registry,
      health,
      staticInstances: config.instances,
      get: getter.get,
      timeoutMs: h.timeoutMs,
      // SGLang guards /server_info too (fixtures README fact 22): discovery presents the engine key.
      apiKeyFor: (id) => config.engineCredentials.get(id)?.apiKey ?? undefined,
      log,
    });
    source = new RegistryInstanceSource({
      registry,
      health,
      staticInstances: config.instances,
      onOriginUnused: (url) => void upstreams.release(url),
      discovery,
      log,
    });
    health.start();
    discovery.start();
    if (h.intervalMs > 0) await Promise.all(registry.list().map((r) => health!.probeNow(r.id)));
    await discovery.settled();
  } catch (err) {
    discovery?.close();
    source?.close();
    await health?.stop();
    await registry.close();
    await getter.close();
    throw err;
  }
  const prober = health;
  const instances = source;
  const discovered = discovery;
  let management: ManagementServer | null = null;
  const apiOptions = (providers: ManagementProviders): ManagementApiOptions => {
    const m = config.management;
    return {
      registry,
      health: prober,
      load: (id) => {
        const instance = instances.get(id);
        if (!instance) return null;
        const extra = providers.load?.(id);
        return { in_flight_legs: instance.inFlight, ...(typeof extra === 'object' ? extra : {}) };
      },
      ...(providers.circuit ? { circuit: providers.circuit } : {}),
      // what routing uses, discovery included; an instance discovery holds out is not routable
      effective: (id) => effectiveView(instances, id),
      routable: (id) => instances.routable().some((i) => i.id === id),
      checkUrl: (url) =>
        instanceUrlRefusal(url, {
          allowLinkLocal: m.allowInstanceUrls.linkLocal,
          allowSelf: m.allowInstanceUrls.self,
          ownPorts: () => ownPorts(providers.gatewayPort?.() ?? null, management?.url ?? null),
        }),
      ...(m.adminToken !== undefined ? { adminToken: m.adminToken } : {}),
      ...(providers.extraRoutes ? { extraRoutes: providers.extraRoutes } : {}),
      logger: log,
    };
  };
  return {
    registry,
    health: prober,
    source: instances,
    discovery: discovered,
    async startManagement(providers = {}) {
      const m = config.management;
      if (m.port === null) return null;
      management = await startManagementServer({ ...apiOptions(providers), port: m.port, host: m.host });
      return management;
    },
    managementHandler: (providers = {}) => createManagementHandler(apiOptions(providers)),
    async close() {
      await management?.close();
      discovered.close();
      instances.close();
      await prober.stop();
      await registry.close();
      await getter.close();
    },
  };
}

/** The ports this coordinator listens on (both known once listening). */
function ownPorts(gatewayPort: number | null, managementUrl: string | null): number[] {
  const ports: number[] = [];
  if (gatewayPort !== null) ports.push(gatewayPort);
  if (managementUrl !== null) ports.push(Number(new URL(managementUrl).port));
  return ports;
}

/** An instance as this replica routes it: configured values filled in by discovery (never its keys). */
function effectiveView(source: RegistryInstanceSource, id: string): Record<string, unknown> | null {
  const i = source.get(id);
  if (!i) return null;
  return {
    engine: i.engine,
    profile: i.profile,
    dispatch_capabilities: i.dispatchCapabilities,
    kv_connector: i.kvConnector ?? null,
    models: servedModels(i),
    bootstrap_port: i.bootstrapPort ?? null,
    problem: source.problems()[id] ?? null,
  };
}
