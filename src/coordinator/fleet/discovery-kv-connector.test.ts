import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../../test/fixtures/engines/load.js';
import { validateCoordinatorConfig, type ResolvedInstance } from '../../config/coordinator-config.js';
import { HealthProber, MemoryRegistry, registerStaticInstances } from '../../registry/index.js';
import { parseProxyInfo, reconcile, type DiscoveryProbe } from './discovery-reconcile.js';
import { InstanceDiscovery } from './instance-discovery.js';
import { RegistryInstanceSource, registrationFromConfig } from './registry-instance-source.js';

const NIXL = fixtureBody('vllm/nixl-newest/kv-transfer-config.prefill.json');
const MOONCAKE = fixtureBody('vllm-ascend/mooncake-main/kv-transfer-config.decode.json');

/** A `/v1/motor/info` body as src/engine-proxy/health-info.ts `proxyInfo` writes it. */
const infoBody = (kvConnector: string | null, role = 'prefill'): Record<string, unknown> => ({
  object: 'motor.engine_proxy_info',
  schema_version: '1.0',
  engine: 'vllm',
  role,
  dispatch_profile: 'handoff',
  dispatch_capabilities: ['prefill_handoff_decode'],
  kv_connector: kvConnector,
  accepts_roles: [role, 'single'],
  bootstrap: null,
});

const proxy = (kvConnector: string | null): DiscoveryProbe => ({
  kind: 'proxy',
  info: parseProxyInfo(infoBody(kvConnector)),
  error: null,
  models: null,
});

const instance = (extra: Record<string, unknown>): ResolvedInstance =>
  validateCoordinatorConfig({ instances: [{ url: 'http://p:1', role: 'prefill', ...extra }] }).instances[0]!;

describe('the KV connector: from the config (direct) or the proxy (discovery)', () => {
  it.each<[string, Record<string, unknown>, string | undefined]>([
    ['kv_connector', { kvTransferConfig: NIXL }, 'NixlConnector'],
    [
      'MultiConnector: its transport (first) connector, as classification decides',
      {
        kvTransferConfig: {
          kv_connector: 'MultiConnector',
          kv_connector_extra_config: { connectors: [MOONCAKE, { kv_connector: 'UCMConnector' }] },
        },
      },
      'MooncakeConnectorV1',
    ],
    [
      'an explicit profile keeps the connector',
      { dispatchProfile: 'handoff', kvTransferConfig: NIXL },
      'NixlConnector',
    ],
    ['no kvTransferConfig: unknown', { dispatchProfile: 'handoff' }, undefined],
  ])('config: %s', (_name, extra, expected) => {
    expect(instance({ mode: 'direct', ...extra }).kvConnector).toBe(expected);
  });

  it('parseProxyInfo reads kv_connector; absent or empty is null', () => {
    expect(parseProxyInfo(infoBody('NixlConnector'))?.kvConnector).toBe('NixlConnector');
    expect(parseProxyInfo(infoBody(''))?.kvConnector).toBeNull();
    const { kv_connector: _omitted, ...older } = infoBody(null);
    expect(parseProxyInfo(older)?.kvConnector).toBeNull();
  });

  it.each<[string, ResolvedInstance, DiscoveryProbe, string | undefined, string[]]>([
    ['bare proxy: the proxy says', instance({}), proxy('NixlConnector'), 'NixlConnector', []],
    ['the proxy names none (SGLang): unknown', instance({}), proxy(null), undefined, []],
    [
      'configured connector disagrees: a note, the config wins',
      instance({ kvTransferConfig: MOONCAKE }),
      proxy('NixlConnector'),
      undefined,
      ['kv connector: config says MooncakeConnectorV1, the proxy reports NixlConnector'],
    ],
  ])('reconcile: %s', (_name, configured, probe, kvConnector, notes) => {
    const outcome = reconcile(configured, probe);
    expect(outcome.kvConnector).toBe(kvConnector);
    expect(outcome.notes).toEqual(notes);
  });

  it('lands on the instance the scheduler reads: discovered, configured, or unknown for a registration', async () => {
    const config = validateCoordinatorConfig({
      instances: [
        { id: 'p', url: 'http://127.0.0.1:9001', role: 'prefill' },
        { id: 'd', url: 'http://127.0.0.1:9002', role: 'decode', mode: 'direct', kvTransferConfig: MOONCAKE },
      ],
    });
    const registry = new MemoryRegistry();
    const health = new HealthProber(registry, { intervalMs: 0, unhealthyAfter: 2, healthyAfter: 1 });
    const discovery = new InstanceDiscovery({
      registry,
      health,
      staticInstances: config.instances,
      timeoutMs: 1_000,
      get: async (base, path) => {
        if (path === '/v1/motor/info' && base === 'http://127.0.0.1:9001') return infoBody('NixlConnector');
        if (path === '/v1/models') return { object: 'list', data: [] };
        throw new Error(`unexpected GET ${base}${path}`);
      },
    });
    const source = new RegistryInstanceSource({
      registry,
      health,
      staticInstances: config.instances,
      discovery,
    });
    health.start();
    discovery.start();
    await registerStaticInstances(registry, config.instances.map(registrationFromConfig));
    await registry.register({
      id: 'r',
      role: 'decode',
      url: 'http://127.0.0.1:9003',
      dispatch_profile: 'handoff',
    });
    await discovery.settled();
    expect(source.get('p')?.kvConnector).toBe('NixlConnector');
    expect(source.get('d')?.kvConnector).toBe('MooncakeConnectorV1');
    expect(source.get('r')?.kvConnector).toBeUndefined();
    source.close();
    discovery.close();
    await health.stop();
  });
});
