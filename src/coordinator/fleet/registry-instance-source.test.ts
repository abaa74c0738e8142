import { describe, expect, it } from 'vitest';
import type { ConfigError } from '../../config/coordinator-config.js';
import { configFromEnv, validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { HealthProber, MemoryRegistry, registerStaticInstances } from '../../registry/index.js';
import { RegistryInstanceSource, registrationFromConfig } from './registry-instance-source.js';

/** A registry + health (passive only: probes off, so instances start healthy) + the source. */
function setup(staticInstances: unknown[] = []) {
  const config = validateCoordinatorConfig({ instances: staticInstances });
  const registry = new MemoryRegistry();
  const health = new HealthProber(registry, { intervalMs: 0, unhealthyAfter: 2, healthyAfter: 1 });
  const released: string[] = [];
  const source = new RegistryInstanceSource({
    registry,
    health,
    staticInstances: config.instances,
    onOriginUnused: (url) => released.push(url),
  });
  health.start();
  return { config, registry, health, source, released };
}

const ids = (list: readonly { id: string }[]): string[] => list.map((i) => i.id).sort();

describe('RegistryInstanceSource', () => {
  it('static config instances keep their index, profile and bootstrap port through the registry', async () => {
    const { config, registry, source } = setup([
      { id: 'p', url: 'http://127.0.0.1:9001/', role: 'prefill', engine: 'sglang', bootstrapPort: 8998 },
      {
        id: 'd',
        url: 'http://127.0.0.1:9002',
        role: 'decode',
        kvTransferConfig: { kv_connector: 'NixlConnector' },
      },
    ]);
    await registerStaticInstances(registry, config.instances.map(registrationFromConfig));
    const p = source.get('p')!;
    expect(p).toMatchObject({
      index: 0,
      url: 'http://127.0.0.1:9001',
      profile: 'bootstrap',
      bootstrapPort: 8998,
      dispatchCapabilities: ['concurrent_engine_sync'],
      inFlight: 0,
    });
    expect(source.get('d')).toMatchObject({ index: 1, profile: 'handoff' });
    expect(registry.get('p')).toMatchObject({ source: 'static', lease: null });
    expect(ids(source.routable())).toEqual(['d', 'p']);
  });

  it('runtime registrations get a numeric index (the seed id when numeric) and a derived profile', async () => {
    const { registry, source } = setup();
    await registry.register({
      id: '42',
      role: 'prefill',
      url: 'http://127.0.0.1:9003',
      dispatch_profile: 'trigger',
    });
    await registry.register({
      id: 'x',
      role: 'decode',
      url: 'http://127.0.0.1:9004',
      dispatch_capabilities: ['concurrent_engine_sync'],
    });
    expect(source.get('42')).toMatchObject({ index: 42, profile: 'trigger' });
    expect(source.get('x')).toMatchObject({ index: 0, profile: 'trigger', engine: 'vllm' });
  });

  it('updates keep the same object (in-flight counters survive); drain and pause leave the routable set', async () => {
    const { registry, source } = setup();
    await registry.register({ id: 'u', role: 'union', url: 'http://127.0.0.1:9005' });
    const u = source.get('u')!;
    u.inFlight = 3;
    await registry.update('u', { models: ['m'] });
    expect(source.get('u')).toBe(u);
    expect(u).toMatchObject({ inFlight: 3, models: ['m'] });
    expect(source.routable()).toEqual([u]);
    await registry.drain('u');
    expect(source.routable()).toEqual([]);
    expect(source.all()).toEqual([u]);
    await registry.resume('u');
    expect(source.routable()).toEqual([u]);
    await registry.pause('u');
    expect(source.routable()).toEqual([]);
  });

  it('legs claim the instance: a drained instance refuses new claims; drain completes when claims end', async () => {
    const { registry, source } = setup();
    await registry.register({ id: 'u', role: 'union', url: 'http://127.0.0.1:9006' });
    const u = source.get('u')!;
    const done = source.acquire(u)!;
    expect(registry.inFlight('u')).toBe(1);
    await registry.drain('u');
    expect(source.acquire(u)).toBeUndefined();
    const drained = registry.awaitDrained('u');
    done();
    done(); // idempotent
    expect(await drained).toBe(true);
    expect(registry.inFlight('u')).toBe(0);
  });

  it('passive failures take an instance out; a success brings it back', async () => {
    const { registry, source } = setup();
    await registry.register({ id: 'u', role: 'union', url: 'http://127.0.0.1:9007' });
    const u = source.get('u')!;
    source.reportFailure(u, 'ECONNREFUSED');
    expect(source.routable()).toEqual([u]);
    source.reportFailure(u, 'ECONNREFUSED');
    expect(source.routable()).toEqual([]);
    source.reportSuccess(u);
    expect(source.routable()).toEqual([u]);
  });

  it('an upstream origin is released once no instance uses it (removal or URL change)', async () => {
    const { registry, source, released } = setup();
    await registry.register({ id: 'a', role: 'union', url: 'http://127.0.0.1:9008/a' });
    await registry.register({ id: 'b', role: 'union', url: 'http://127.0.0.1:9008/b' });
    await registry.register({ id: 'c', role: 'union', url: 'http://127.0.0.1:9009' });
    await registry.remove('a');
    expect(released).toEqual([]); // b still uses the origin
    await registry.remove('b');
    expect(released).toEqual(['http://127.0.0.1:9008/b']);
    await registry.update('c', { url: 'http://127.0.0.1:9010' });
    expect(released).toEqual(['http://127.0.0.1:9008/b', 'http://127.0.0.1:9009']);
    expect(ids(source.all())).toEqual(['c']);
    source.close();
    await registry.register({ id: 'd', role: 'union', url: 'http://127.0.0.1:9011' });
    expect(source.get('d')).toBeUndefined(); // unsubscribed
  });
});

describe('coordinator config: registry, health, management', () => {
  it('defaults: memory store, 2 s probes, management off', () => {
    const c = validateCoordinatorConfig({});
    expect(c.registry).toMatchObject({ store: 'memory', prefix: '/motor/' });
    expect(c.health).toMatchObject({ intervalMs: 2000, timeoutMs: 1000, unhealthyAfter: 3, healthyAfter: 2 });
    expect(c.management).toMatchObject({ port: null, host: '127.0.0.1' });
  });

  it('etcd needs endpoints; bad values name their path', () => {
    const issues = (raw: unknown): string[] => {
      try {
        validateCoordinatorConfig(raw);
        return [];
      } catch (err) {
        return (err as ConfigError).issues;
      }
    };
    expect(issues({ registry: { store: 'etcd' } })).toEqual([
      'registry.endpoints: store etcd needs at least one endpoint',
    ]);
    expect(issues({ registry: { store: 'redis' } })[0]).toMatch(/^registry\.store: /);
    expect(issues({ management: { port: 70000 } })[0]).toMatch(/^management\.port: /);
    expect(issues({ health: { unhealthyAfter: 0 } })[0]).toMatch(/^health\.unhealthyAfter: /);
  });

  it('MOTOR_ADMIN_TOKEN and MOTOR_MANAGEMENT_PORT come from the environment', () => {
    expect(configFromEnv({ MOTOR_ADMIN_TOKEN: 't', MOTOR_MANAGEMENT_PORT: '8001' })).toEqual({
      management: { adminToken: 't', port: 8001 },
    });
  });
});
