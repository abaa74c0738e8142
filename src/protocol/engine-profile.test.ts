import { expect, it } from 'vitest';
import { explainEngineProfile, type EngineKind } from './engine-profile.js';

it.each<[string, unknown, EngineKind | undefined, string | undefined, string, string]>([
  [
    'vllm engine config',
    { kv_transfer_config: { kv_connector: 'NixlConnector' } },
    undefined,
    undefined,
    'handoff',
    'kv_transfer_config.kv_connector',
  ],
  ['sglang flag', {}, 'sglang', undefined, 'bootstrap', 'engine'],
  ['sglang engine_type', { engine_type: 'SGLang' }, undefined, undefined, 'bootstrap', 'engine'],
  [
    'endpoint config form',
    {
      engine_type: 'vllm',
      deploy_config: {
        engine_config: { kv_transfer_config: { kv_connector: 'MooncakeLayerwiseConnector' } },
      },
    },
    undefined,
    undefined,
    'trigger',
    'deploy_config.engine_config.kv_transfer_config.kv_connector',
  ],
  [
    'endpoint config profile',
    { engine_type: 'vllm', deploy_config: { dispatch_profile: 'handoff' } },
    undefined,
    undefined,
    'handoff',
    'deploy_config.dispatch_profile',
  ],
  [
    'explicit override',
    { kv_transfer_config: { kv_connector: 'NixlConnector' } },
    'vllm',
    'trigger',
    'trigger',
    'explicit dispatch_profile argument',
  ],
  [
    'unknown connector',
    { kv_transfer_config: { kv_connector: 'P2pNcclConnector' } },
    undefined,
    undefined,
    'unknown',
    'kv_transfer_config.kv_connector',
  ],
])('%s', (_name, config, engine, explicit, profile, decidedBy) => {
  const explanation = explainEngineProfile(config, engine, explicit);
  expect(explanation.profile).toBe(profile);
  expect(explanation.decidedBy).toBe(decidedBy);
});
