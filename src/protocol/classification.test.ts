import { describe, expect, it } from 'vitest';
import {
  classifyVllmDispatchProfile,
  dispatchCapabilitiesForProfile,
  DispatchProfileError,
  explainVllmDispatchProfile,
  inferVllmDispatchProfileFromConfig,
} from './classification.js';
import { kvConnectorFamily, MOTOR_CONNECTORS, SEED_CONNECTORS } from './connector-table.js';
import type { DispatchPlan, DispatchProfile } from './enums.js';

const kv = (connector: unknown) => ({ kv_transfer_config: { kv_connector: connector } });
const multi = (connectors: unknown) => ({
  kv_transfer_config: { kv_connector: 'MultiConnector', kv_connector_extra_config: { connectors } },
});

describe('classifyVllmDispatchProfile (conformance 3-7)', () => {
  it.each<[string, unknown, unknown, DispatchProfile]>([
    // 3: trigger connector
    ['layerwise', kv('MooncakeLayerwiseConnector'), undefined, 'trigger'],
    // 4: handoff connectors, any case, surrounding spaces
    ['nixl', kv('NixlConnector'), undefined, 'handoff'],
    ['mooncake v1', kv('MooncakeConnectorV1'), undefined, 'handoff'],
    ['mooncake hybrid', kv('MooncakeHybridConnector'), undefined, 'handoff'],
    ['upper case + spaces', kv('  NIXLCONNECTOR  '), undefined, 'handoff'],
    ['lower case', kv('mooncakelayerwiseconnector'), undefined, 'trigger'],
    // 5: MultiConnector classifies connectors[0] and needs >= 2 entries
    [
      'multi nixl first',
      multi([{ kv_connector: 'NixlConnector' }, { kv_connector: 'LMCacheConnectorV1' }]),
      undefined,
      'handoff',
    ],
    [
      'multi layerwise first',
      multi([{ kv_connector: 'MooncakeLayerwiseConnector' }, { kv_connector: 'X' }]),
      undefined,
      'trigger',
    ],
    ['multi one entry', multi([{ kv_connector: 'NixlConnector' }]), undefined, 'unknown'],
    [
      'multi non-object first',
      multi(['NixlConnector', { kv_connector: 'NixlConnector' }]),
      undefined,
      'unknown',
    ],
    ['multi connectors not a list', multi({ 0: { kv_connector: 'NixlConnector' } }), undefined, 'unknown'],
    [
      'multi extra config not object',
      { kv_transfer_config: { kv_connector: 'MultiConnector', kv_connector_extra_config: 'x' } },
      undefined,
      'unknown',
    ],
    [
      'multi of multi',
      multi([multi([{ kv_connector: 'NixlConnector' }, {}]).kv_transfer_config, {}]),
      undefined,
      'handoff',
    ],
    // 6: unknown names; the name is authoritative, a module path does not count
    ['unknown connector', kv('LMCacheConnectorV1'), undefined, 'unknown'],
    [
      'module path only',
      { kv_transfer_config: { kv_connector: 'Custom', kv_connector_module_path: 'x.nixl.NixlConnector' } },
      undefined,
      'unknown',
    ],
    ['dotted name', kv('vllm.NixlConnector'), undefined, 'unknown'],
    ['no kv config', {}, undefined, 'unknown'],
    ['kv config null', { kv_transfer_config: null }, undefined, 'unknown'],
    ['kv config list', { kv_transfer_config: ['NixlConnector'] }, undefined, 'unknown'],
    ['connector not a string', kv(['NixlConnector']), undefined, 'unknown'],
    ['config null', null, undefined, 'unknown'],
    // 7: explicit profile wins; plan names are aliases; unknown/empty ignored
    ['explicit arg wins', kv('NixlConnector'), 'trigger', 'trigger'],
    [
      'explicit in config wins',
      { ...kv('NixlConnector'), dispatch_profile: 'bootstrap' },
      undefined,
      'bootstrap',
    ],
    ['arg beats config', { dispatch_profile: 'bootstrap' }, 'handoff', 'handoff'],
    ['plan alias handoff', kv('MooncakeLayerwiseConnector'), 'prefill_handoff_decode', 'handoff'],
    ['plan alias trigger', kv('NixlConnector'), ' Concurrent_Engine_Sync ', 'trigger'],
    ['explicit unknown ignored', kv('NixlConnector'), 'unknown', 'handoff'],
    ['explicit empty ignored', { ...kv('NixlConnector'), dispatch_profile: '' }, '', 'handoff'],
    ['explicit spaces ignored', kv('NixlConnector'), '   ', 'handoff'],
    [
      'Map config',
      new Map([['kv_transfer_config', { kv_connector: 'NixlConnector' }]]),
      undefined,
      'handoff',
    ],
  ])('%s', (_name, config, explicit, expected) => {
    expect(classifyVllmDispatchProfile(config, explicit)).toBe(expected);
  });

  it.each<[unknown, unknown]>([
    ['magic', undefined],
    [undefined, 'magic'],
    [7, undefined],
    [true, undefined],
  ])('invalid explicit profile (%o, %o) lists the allowed values', (inConfig, explicit) => {
    const config = { ...kv('NixlConnector'), dispatch_profile: inConfig };
    expect(() => classifyVllmDispatchProfile(config, explicit)).toThrow(DispatchProfileError);
    expect(() => classifyVllmDispatchProfile(config, explicit)).toThrow(
      /Allowed values: trigger, handoff, bootstrap\./,
    );
  });

  it('names the invalid value like the seed', () => {
    expect(() => classifyVllmDispatchProfile({}, 'magic')).toThrow("Unsupported dispatch_profile 'magic'.");
  });

  it.each([
    [kv('NixlConnector'), 'kv_transfer_config.kv_connector'],
    [{ dispatch_profile: 'trigger' }, 'dispatch_profile'],
    [
      multi([{ kv_connector: 'NixlConnector' }, {}]),
      'kv_transfer_config.kv_connector_extra_config.connectors[0].kv_connector',
    ],
    [multi([{}]), 'kv_transfer_config.kv_connector_extra_config.connectors'],
  ])('explains which key decided (%o)', (config, decidedBy) => {
    expect(explainVllmDispatchProfile(config).decidedBy).toBe(decidedBy);
  });
});

describe('inferVllmDispatchProfileFromConfig (conformance 8)', () => {
  const endpoint = (engineType: unknown, deploy: unknown) => ({
    get_endpoint_config: () => ({ engine_type: engineType, deploy_config: deploy }),
  });
  it.each<[string, Parameters<typeof inferVllmDispatchProfileFromConfig>[0], DispatchProfile]>([
    ['vllm nixl', endpoint('vllm', { engine_config: kv('NixlConnector') }), 'handoff'],
    ['vllm any case', endpoint(' VLLM ', { engine_config: kv('MooncakeLayerwiseConnector') }), 'trigger'],
    [
      'deploy dispatch_profile',
      endpoint('vllm', { engine_config: kv('NixlConnector'), dispatch_profile: 'trigger' }),
      'trigger',
    ],
    ['sglang is not vllm', endpoint('sglang', { engine_config: kv('NixlConnector') }), 'unknown'],
    ['no engine type', endpoint(null, { engine_config: kv('NixlConnector') }), 'unknown'],
    ['no deploy config', endpoint('vllm', null), 'unknown'],
    ['no endpoint config', { get_endpoint_config: () => null }, 'unknown'],
    ['no getter', {}, 'unknown'],
    [
      'plain data form',
      { endpoint_config: { engine_type: 'vllm', deploy_config: { engine_config: kv('NixlConnector') } } },
      'handoff',
    ],
    ['null', null, 'unknown'],
  ])('%s', (_name, config, expected) => expect(inferVllmDispatchProfileFromConfig(config)).toBe(expected));
});

describe('dispatchCapabilitiesForProfile', () => {
  it.each<[DispatchProfile, DispatchPlan[]]>([
    ['handoff', ['prefill_handoff_decode']],
    ['trigger', ['concurrent_engine_sync']],
    // 8: SGLang instances (bootstrap) advertise concurrent_engine_sync
    ['bootstrap', ['concurrent_engine_sync']],
    ['unknown', []],
  ])('%s → %o', (profile, plans) => expect(dispatchCapabilitiesForProfile(profile)).toEqual(plans));
});

describe("connector tables: the seed's and Motor's superset", () => {
  it.each<[string, DispatchProfile, DispatchProfile]>([
    // [connector, seed, Motor]
    ['NixlConnector', 'handoff', 'handoff'],
    ['NixlPullConnector', 'unknown', 'handoff'],
    [' nixlpushconnector ', 'unknown', 'handoff'],
    ['MooncakeLayerwiseConnector', 'trigger', 'trigger'],
    ['MooncakeConnector', 'unknown', 'unknown'],
  ])('%s: seed %s, Motor %s', (connector, seed, motor) => {
    expect(classifyVllmDispatchProfile(kv(connector))).toBe(seed);
    expect(explainVllmDispatchProfile(kv(connector)).profile).toBe(seed);
    expect(explainVllmDispatchProfile(kv(connector), undefined, MOTOR_CONNECTORS).profile).toBe(motor);
  });

  it('classifies a newer name inside a MultiConnector with Motor’s table only', () => {
    const config = multi([{ kv_connector: 'NixlPushConnector' }, { kv_connector: 'LMCacheConnectorV1' }]);
    expect(explainVllmDispatchProfile(config, undefined, SEED_CONNECTORS).profile).toBe('unknown');
    expect(explainVllmDispatchProfile(config, undefined, MOTOR_CONNECTORS)).toMatchObject({
      profile: 'handoff',
      kvConnector: 'NixlPushConnector',
    });
  });

  it.each([
    ['NixlConnector', 'NixlPullConnector', true],
    ['NixlPullConnector', 'nixlpullconnector ', true],
    ['NixlConnector', 'NixlPushConnector', false],
    ['NixlPushConnector', 'NixlPushConnector', true],
    ['MooncakeConnectorV1', 'NixlConnector', false],
  ])('%s and %s share a KV wire: %s', (a, b, same) => {
    expect(kvConnectorFamily(a) === kvConnectorFamily(b)).toBe(same);
  });
});
