import type { Logger } from '../common/logger.js';
import { EtcdRegistry } from './etcd-registry.js';
import { RegistryError, type InstanceRecord, type InstanceRegistration } from './instance-record.js';
import { MemoryRegistry } from './memory-registry.js';
import type { Registry } from './registry.js';

/** The `registry` section of the coordinator config. */
export type RegistryConfig =
  | { store?: 'memory' }
  | {
      store: 'etcd';
      /** etcd client URLs, e.g. `["http://10.0.0.5:2379"]`. */
      endpoints: string | string[];
      /** Shared by all replicas of one deployment; different deployments use different prefixes. */
      prefix?: string;
      auth?: { username: string; password: string };
      dialTimeoutMs?: number;
    };

/** Builds the configured store; for etcd, resolves once connected and the fleet is loaded. */
export async function createRegistry(
  config: RegistryConfig = {},
  deps: { logger?: Logger } = {},
): Promise<Registry> {
  if (config.store === 'etcd') {
    return EtcdRegistry.create({
      endpoints: config.endpoints,
      ...(config.prefix !== undefined ? { prefix: config.prefix } : {}),
      ...(config.auth !== undefined ? { auth: config.auth } : {}),
      ...(config.dialTimeoutMs !== undefined ? { dialTimeoutMs: config.dialTimeoutMs } : {}),
      ...(deps.logger ? { logger: deps.logger } : {}),
    });
  }
  return new MemoryRegistry(deps.logger ? { logger: deps.logger } : {});
}

/**
 * Registers the config file's instances (source `static`, no lease). Idempotent across restarts and
 * replicas: an existing record keeps its operator-set state (a drained instance stays drained).
 * Validation errors name the entry: `instances[2].role: ...`.
 */
export async function registerStaticInstances(
  registry: Registry,
  instances: InstanceRegistration[],
): Promise<InstanceRecord[]> {
  const out: InstanceRecord[] = [];
  for (const [i, instance] of instances.entries()) {
    try {
      out.push(await registry.register(instance, { source: 'static' }));
    } catch (err) {
      if (err instanceof RegistryError && err.code === 'invalid_instance') {
        const param = err.param ? `instances[${i}].${err.param}` : `instances[${i}]`;
        throw new RegistryError(err.code, `instances[${i}].${err.message}`, param);
      }
      throw err;
    }
  }
  return out;
}
