import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StructuredFileError } from '../common/structured-file.js';
import { engineConfigFromArgs, readEngineConfig, wrapBareKvTransferConfig } from './engine-config-input.js';
import { explainEngineProfile } from './engine-profile.js';

const dir = mkdtempSync(join(tmpdir(), 'motor-engine-config-'));
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}';

describe('wrapBareKvTransferConfig', () => {
  it.each<[string, unknown, boolean]>([
    ['bare NIXL', { kv_connector: 'NixlConnector', kv_role: 'kv_both' }, true],
    ['role only', { kv_role: 'kv_consumer', kv_port: 14579 }, true],
    ['wrapped stays', { kv_transfer_config: { kv_connector: 'NixlConnector' } }, false],
    // a key that is no KVTransferConfig field: an engine config that happens to have kv_connector
    ['engine config', { kv_connector: 'NixlConnector', model: 'm' }, false],
    ['no connector or role', { kv_port: 1 }, false],
    ['not a mapping', ['kv_connector'], false],
  ])('%s', (_name, value, bare) => {
    const out = wrapBareKvTransferConfig(value);
    expect(out.bare).toBe(bare);
    expect(out.config).toEqual(bare ? { kv_transfer_config: value } : value);
  });
});

describe('engineConfigFromArgs', () => {
  it.each<[string, string[], Record<string, unknown>]>([
    [
      'vllm serve',
      ['vllm', 'serve', 'Qwen/Qwen3-0.6B', '--kv-transfer-config', NIXL, '--enforce-eager', '--port', '8100'],
      { 'kv-transfer-config': NIXL, 'enforce-eager': true, port: '8100' },
    ],
    ['equals form', ['--kv_transfer_config=' + NIXL], { kv_transfer_config: NIXL }],
    [
      'dotted fields',
      ['--kv-transfer-config.kv_connector', 'NixlConnector', '--kv-transfer-config.kv_role=kv_both'],
      { 'kv-transfer-config': { kv_connector: 'NixlConnector', kv_role: 'kv_both' } },
    ],
    [
      'sglang',
      [
        'python',
        '-m',
        'sglang.launch_server',
        '--disaggregation-mode',
        'prefill',
        '--disaggregation-transfer-backend',
        'mooncake',
      ],
      { 'disaggregation-mode': 'prefill', 'disaggregation-transfer-backend': 'mooncake' },
    ],
    ['trailing boolean', ['--trust-remote-code'], { 'trust-remote-code': true }],
    ['last wins', ['--port', '1', '--port', '2'], { port: '2' }],
  ])('%s', (_name, argv, expected) => {
    expect(engineConfigFromArgs(argv)).toEqual(expected);
  });
});

describe('readEngineConfig: every form classifies as the engine would run', () => {
  it.each<[string, string | string[], string, string, string]>([
    [
      'bare JSON file',
      file('bare.json', NIXL),
      'vLLM --kv-transfer-config JSON',
      'handoff',
      'kv_transfer_config.kv_connector',
    ],
    [
      'bare JSON inline',
      NIXL,
      'vLLM --kv-transfer-config JSON',
      'handoff',
      'kv_transfer_config.kv_connector',
    ],
    [
      'wrapped inline',
      '{"kv_transfer_config":{"kv_connector":"MooncakeLayerwiseConnector"}}',
      'inline JSON',
      'trigger',
      'kv_transfer_config.kv_connector',
    ],
    [
      'argument string',
      `--kv-transfer-config '${NIXL}'`,
      'launch arguments',
      'handoff',
      'kv-transfer-config.kv_connector',
    ],
    [
      'full vllm serve line with continuation',
      `vllm serve Qwen/Qwen3-0.6B \\\n  --kv-transfer-config '${NIXL}' --port 8100`,
      'launch arguments',
      'handoff',
      'kv-transfer-config.kv_connector',
    ],
    [
      'vllm YAML config file',
      file(
        'serve.yaml',
        'model: Qwen/Qwen3-0.6B\nkv-transfer-config:\n  kv_connector: NixlConnector\n  kv_role: kv_both\n',
      ),
      'config file',
      'handoff',
      'kv-transfer-config.kv_connector',
    ],
    [
      'sglang words',
      ['--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'mooncake'],
      'launch arguments',
      'bootstrap',
      'engine',
    ],
    [
      'sglang string',
      'python -m sglang.launch_server --model-path m --disaggregation-mode decode',
      'launch arguments',
      'bootstrap',
      'engine',
    ],
  ])('%s', async (_name, input, form, profile, decidedBy) => {
    const read = await readEngineConfig(input, 'engine config');
    expect(read.form).toBe(form);
    expect(explainEngineProfile(read.config)).toMatchObject({ profile, decidedBy });
  });

  it.each<[string, string | string[], RegExp]>([
    [
      'broken inline JSON',
      '{"kv_connector":',
      /^engine config: inline JSON does not parse \(.*\); quote it in single quotes$/,
    ],
    ['missing file', join(dir, 'nope.yaml'), /^engine config .*nope\.yaml: not found/],
    ['nothing', [], /^engine config: give a file, inline JSON or launch arguments$/],
  ])('%s: one line', async (_name, input, message) => {
    const error = await readEngineConfig(input, 'engine config').catch((err: unknown) => err);
    expect(error).toBeInstanceOf(StructuredFileError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });
});

describe('did you mean, in the classification reason', () => {
  it.each<[string, string | string[], RegExp]>([
    [
      'vLLM connector typo',
      '{"kv_connector":"NixlConnecter"}',
      /'NixlConnecter' is not a P\/D connector .*; did you mean 'NixlConnector'\?$/,
    ],
    ['far-off name: no guess', '{"kv_connector":"LMCacheConnectorV1"}', /fail closed\)$/],
    [
      'SGLang backend typo',
      ['--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'mooncak'],
      /'mooncak' is not an SGLang transfer backend .*; did you mean 'mooncake'\?$/,
    ],
    [
      'SGLang mode typo',
      ['--disaggregation-mode', 'prefil'],
      /'prefil' is not one of null, prefill, decode; did you mean 'prefill'\?$/,
    ],
    [
      'SGLang not disaggregated',
      ['--disaggregation-mode', 'null'],
      /not disaggregated and is never paired; set prefill or decode$/,
    ],
  ])('%s', async (_name, input, reason) => {
    const explanation = explainEngineProfile((await readEngineConfig(input, 'engine config')).config);
    expect(explanation.profile).toBe('unknown');
    expect(explanation.reason).toMatch(reason);
  });
});
