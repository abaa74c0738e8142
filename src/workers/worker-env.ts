import { randomBytes } from 'node:crypto';
import type { CoordinatorConfig } from '../config/coordinator-config.js';

/** Carries the tenant-salt secret the primary drew to its workers (never logged, never in argv). */
export const WORKERS_TENANT_SECRET_ENV = 'MOTOR_WORKERS_TENANT_SALT_SECRET';

/**
 * What the primary adds to its workers' environment so they agree where one process would by itself:
 * with `server.tenantIsolation` on and no `tenantSaltSecretEnv`, each process would draw its own random
 * secret, so one tenant's prompts would get a different `cache_salt` (and prefix-cache entries) on each
 * worker; the primary draws one for them all.
 */
export function sharedWorkerEnv(server: CoordinatorConfig['server']): Record<string, string> {
  if (server.tenantIsolation === 'off' || server.tenantSaltSecretEnv !== undefined) return {};
  return { [WORKERS_TENANT_SECRET_ENV]: randomBytes(32).toString('base64url') };
}

/** The `--set` overrides a worker adds to its flags to use what {@link sharedWorkerEnv} gave it. */
export function workerConfigOverrides(env: NodeJS.ProcessEnv): string[] {
  return env[WORKERS_TENANT_SECRET_ENV] ? [`server.tenantSaltSecretEnv=${WORKERS_TENANT_SECRET_ENV}`] : [];
}
