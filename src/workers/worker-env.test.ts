import { describe, expect, it } from 'vitest';
import { sharedWorkerEnv, workerConfigOverrides, WORKERS_TENANT_SECRET_ENV } from './worker-env.js';

type Server = Parameters<typeof sharedWorkerEnv>[0];
const server = (over: Partial<Server>): Server => ({ tenantIsolation: 'off', ...over }) as Server;

describe('shared worker secrets', () => {
  it.each([
    ['isolation off: nothing to share', server({}), false],
    [
      'a configured secret: every worker reads it already',
      server({ tenantIsolation: 'api-key', tenantSaltSecretEnv: 'S' }),
      false,
    ],
    ['isolation on, no secret: the primary draws one', server({ tenantIsolation: 'header:x-tenant' }), true],
  ])('%s', (_what, cfg, shared) => {
    const env = sharedWorkerEnv(cfg);
    expect(WORKERS_TENANT_SECRET_ENV in env).toBe(shared);
    expect(workerConfigOverrides(env)).toEqual(
      shared ? [`server.tenantSaltSecretEnv=${WORKERS_TENANT_SECRET_ENV}`] : [],
    );
  });

  it('each primary draws a fresh secret', () => {
    const a = sharedWorkerEnv(server({ tenantIsolation: 'api-key' }))[WORKERS_TENANT_SECRET_ENV];
    const b = sharedWorkerEnv(server({ tenantIsolation: 'api-key' }))[WORKERS_TENANT_SECRET_ENV];
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
  });
});
