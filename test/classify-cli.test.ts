import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const bin = fileURLToPath(new URL('../bin/motor.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'motor-classify-'));

function classify(config: string, ...args: string[]) {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, config);
  return spawnSync(process.execPath, [bin, 'classify', file, ...args], { encoding: 'utf8' });
}

describe('motor classify', () => {
  it.each([
    [
      '{"kv_transfer_config":{"kv_connector":"NixlConnector"}}',
      [],
      /profile:\s+handoff[\s\S]*capabilities: prefill_handoff_decode[\s\S]*decided by:\s+kv_transfer_config.kv_connector/,
    ],
    [
      '{"kv_transfer_config":{"kv_connector":"MooncakeLayerwiseConnector"}}',
      [],
      /profile:\s+trigger[\s\S]*concurrent_engine_sync/,
    ],
    // newer vLLM names: a handoff plan in Motor, the seed's strict answer with --seed
    [
      '{"kv_transfer_config":{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}}',
      [],
      /profile:\s+handoff[\s\S]*capabilities: prefill_handoff_decode[\s\S]*Motor's superset/,
    ],
    [
      '{"kv_transfer_config":{"kv_connector":"NixlPullConnector"}}',
      [],
      /profile:\s+handoff[\s\S]*prefill_handoff_decode/,
    ],
    ['{"kv_transfer_config":{"kv_connector":"NixlConnector"}}', ['--seed'], /profile:\s+handoff/],
    ['{}', ['--engine', 'sglang'], /profile:\s+bootstrap[\s\S]*concurrent_engine_sync/],
  ])('%s %o', (config, args, pattern) => {
    const run = classify(config, ...args);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(pattern);
  });

  it.each([
    [
      '{"kv_transfer_config":{"kv_connector":"Mystery"}}',
      /'Mystery' is not a P\/D connector Motor knows, so this engine is never paired \(fail closed\)/,
    ],
    ['{"kv_transfer_config":{}}', /kv_transfer_config names no kv_connector, so this engine is never paired/],
    // the seed's strict answer for a newer vLLM name
    ['{"kv_transfer_config":{"kv_connector":"NixlPushConnector"}}', /fail closed/, '--seed'],
  ])(
    'exits 1 for a config that classifies as unknown, with the reason as a sentence: %s',
    (config: string, reason: RegExp, ...args: string[]) => {
      const run = classify(config, ...args);
      expect(run.status).toBe(1);
      expect(run.stdout).toMatch(/profile:\s+unknown/);
      expect(run.stdout).toMatch(reason);
    },
  );

  it('prints JSON', () => {
    const run = classify('{"dispatch_profile":"prefill_handoff_decode"}', '--json');
    expect(JSON.parse(run.stdout)).toMatchObject({
      profile: 'handoff',
      decidedBy: 'dispatch_profile',
      dispatch_capabilities: ['prefill_handoff_decode'],
    });
  });

  it.each([
    [
      '{"dispatch_profile":"magic"}',
      [],
      /Unsupported dispatch_profile 'magic'. Allowed values: trigger, handoff, bootstrap/,
    ],
    ['{}', ['--profile', 'fast'], /Unsupported dispatch_profile 'fast'/],
    ['{not json', [], /invalid JSON/],
    ['{}', ['--engine', 'tgi'], /--engine must be one of vllm, sglang/],
  ])('exits 2 on bad input %s %o', (config, args, pattern) => {
    const run = classify(config, ...args);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(pattern);
  });

  // issue 18 item 5: the shapes users hand to classify, as files (test/fixtures/classify)
  it.each([
    ['endpoint-top-level.json', 'handoff', 'kv_transfer_config.kv_connector', undefined],
    ['vllm-serve-config.yaml', 'trigger', 'kv-transfer-config.kv_connector', undefined],
    ['vllm-serve-config-json-string.yaml', 'handoff', 'kv-transfer-config.kv_connector', undefined],
    ['sglang-server-args.yaml', 'bootstrap', 'engine', undefined],
    ['sglang-server-info.json', 'bootstrap', 'engine', undefined],
    [
      'endpoint-both.json',
      'handoff',
      'deploy_config.engine_config.kv_transfer_config.kv_connector',
      /kv_transfer_config \(top level\): deploy_config.engine_config is the engine's config/,
    ],
  ])('fixture %s → %s, decided by %s', (fixture, profile, decidedBy, skipped) => {
    const file = fileURLToPath(new URL(`fixtures/classify/${fixture}`, import.meta.url));
    const run = spawnSync(process.execPath, [bin, 'classify', file, '--json'], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as { profile: string; decidedBy: string; skipped: string[] };
    expect(out).toMatchObject({ profile, decidedBy });
    if (skipped) expect(out.skipped.join('\n')).toMatch(skipped);
    else expect(out.skipped).toEqual([]);
    const text = spawnSync(process.execPath, [bin, 'classify', file], { encoding: 'utf8' });
    if (skipped) expect(text.stdout).toMatch(/^skipped: {6}/m);
  });

  // vLLM's own --kv-transfer-config value, inline, as an argument string and as launch words after --
  const NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}';
  it.each([
    ['bare inline JSON', [NIXL], 0, /input:\s+vLLM --kv-transfer-config JSON[\s\S]*profile:\s+handoff/],
    ['argument string', [`--kv-transfer-config '${NIXL}'`], 0, /input:\s+launch arguments[\s\S]*handoff/],
    ["vLLM's flag as written", ['--kv-transfer-config', NIXL], 0, /input:\s+launch arguments[\s\S]*handoff/],
    [
      'SGLang launch words after --',
      ['--', '--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'mooncake'],
      0,
      /profile:\s+bootstrap/,
    ],
    [
      'a typo gets the nearest name',
      ['{"kv_connector":"NixlConnecter","kv_role":"kv_both"}'],
      1,
      /did you mean 'NixlConnector'\?/,
    ],
  ])('%s', (_name, args, status, pattern) => {
    const run = spawnSync(process.execPath, [bin, 'classify', ...args], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(status);
    expect(run.stdout).toMatch(pattern);
  });
});
