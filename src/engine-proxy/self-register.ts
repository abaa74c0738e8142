import type { Logger } from '../common/logger.js';
import { registerWithCoordinator, type CoordinatorRegistration } from '../registry/heartbeat-client.js';
import type { InstanceRegistration } from '../registry/instance-record.js';
import type { EngineProxyOptions } from './options.js';

export interface SelfRegisterOptions {
  /** The coordinator's management API base URL. */
  coordinatorUrl: string;
  adminToken?: string | undefined;
  /** Default `<role>-<host:port of advertiseUrl>`. */
  instanceId?: string | undefined;
  /** The URL coordinators use to reach this proxy. */
  advertiseUrl: string;
  models: readonly string[];
  heartbeatMs: number;
  bootstrapPort: number | null;
}

/** The registration `motor engine-proxy --register` sends for itself. */
export function selfRegistration(
  options: SelfRegisterOptions,
  proxy: Pick<EngineProxyOptions, 'role' | 'engine' | 'dispatchCapabilities'>,
): InstanceRegistration {
  const url = options.advertiseUrl.replace(/\/+$/, '');
  return {
    id: options.instanceId ?? `${proxy.role}-${new URL(url).host}`,
    role: proxy.role,
    url,
    engine: proxy.engine,
    mode: 'proxy',
    dispatch_capabilities: [...proxy.dispatchCapabilities],
    models: [...options.models],
    labels: options.bootstrapPort !== null ? { bootstrap_port: String(options.bootstrapPort) } : {},
  };
}

/**
 * Registers this engine proxy with a coordinator's management API under a heartbeat lease (TTL
 * 3 × `heartbeatMs`) and keeps it alive; `close({drainTimeoutMs})` drains, waits for the
 * coordinator's in-flight requests, and deregisters.
 */
export function selfRegister(
  options: SelfRegisterOptions,
  proxy: Pick<EngineProxyOptions, 'role' | 'engine' | 'dispatchCapabilities'>,
  logger: Logger,
): CoordinatorRegistration {
  return registerWithCoordinator(options.coordinatorUrl, selfRegistration(options, proxy), {
    intervalMs: options.heartbeatMs,
    ...(options.adminToken ? { adminToken: options.adminToken } : {}),
    logger,
  });
}
