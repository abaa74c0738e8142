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
  [
    'kv_transfer_config beside engine_type',
    { engine_type: 'vllm', kv_transfer_config: { kv_connector: 'NixlConnector' } },
    undefined,
    undefined,
    'handoff',
    'kv_transfer_config.kv_connector',
  ],
  [
    'vLLM --config spelling, a JSON string',
    { 'kv-transfer-config': '{"kv_connector":"MooncakeLayerwiseConnector"}' },
    undefined,
    undefined,
    'trigger',
    'kv-transfer-config.kv_connector',
  ],
  [
    'SGLang server args',
    { 'model-path': 'm', 'disaggregation-mode': 'prefill' },
    undefined,
    undefined,
    'bootstrap',
    'engine',
  ],
  [
    'engine_type wins over SGLang-looking keys',
    { engine_type: 'vllm', disaggregation_mode: 'prefill' },
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

it.each<[string, unknown, RegExp]>([
  [
    'top level beside deploy_config.engine_config',
    {
      engine_type: 'vllm',
      kv_transfer_config: { kv_connector: 'NixlConnector' },
      deploy_config: { engine_config: { kv_transfer_config: { kv_connector: 'NixlConnector' } } },
    },
    /^kv_transfer_config \(top level\): deploy_config.engine_config is the engine's config$/,
  ],
  [
    'both spellings',
    { kv_transfer_config: { kv_connector: 'NixlConnector' }, 'kv-transfer-config': {} },
    /^kv-transfer-config: kv_transfer_config is given too$/,
  ],
  ['invalid JSON string', { 'kv-transfer-config': '{nope' }, /^kv-transfer-config: not valid JSON$/],
  [
    'a vLLM key in an SGLang file',
    { 'disaggregation-mode': 'decode', kv_transfer_config: {} },
    /^kv_transfer_config: a vLLM key; SGLang engines rendezvous by bootstrap room$/,
  ],
])('says which key it skipped: %s', (_name, config, note) => {
  const { skipped } = explainEngineProfile(config);
  expect(skipped).toHaveLength(1);
  expect(skipped[0]).toMatch(note);
});

it.each<[string, boolean, string]>([
  ['NixlPushConnector', false, 'handoff'],
  ['NixlPushConnector', true, 'unknown'],
  ['NixlPullConnector', false, 'handoff'],
  ['NixlPullConnector', true, 'unknown'],
  ['NixlConnector', true, 'handoff'],
])('%s (strict %s) → %s', (connector, strict, profile) => {
  const config = { kv_transfer_config: { kv_connector: connector } };
  expect(explainEngineProfile(config, 'vllm', undefined, { strict })).toMatchObject({
    profile,
    kvConnector: connector,
  });
});
