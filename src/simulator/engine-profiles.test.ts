import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { ENGINE_PROFILES, resolveProfile, type SimEngine } from './engine-profiles.js';
import { metaserverBody } from './metaserver-call.js';

describe('resolveProfile', () => {
  it.each([
    ['vllm', null, 'nixl-newest'],
    ['vllm', 'nixl-2026-01', 'nixl-2026-01'],
    ['vllm-ascend', null, 'main'],
    ['vllm-ascend', 'v0.16', 'v0.15'],
    ['vllm-ascend', 'v0.13', 'v0.13'],
    ['sglang', null, 'index-001c2ae'],
    ['vllm', 'nixl-push', 'nixl-push'],
    ['sglang', 'rust-server', 'rust-server'],
  ] as const)('%s %s → %s', (engine, version, want) => {
    expect(resolveProfile(engine, version).version).toBe(want);
  });

  it.each([
    [
      'vllm',
      'v0.13',
      /unknown --engine-version 'v0.13' for --engine vllm \(expected one of: nixl-newest, nixl-push, nixl-2026-01\)/,
    ],
    ['vllm-ascend', 'v9', /expected one of: main, v0.18, v0.17, v0.16, v0.15, v0.14, v0.13/],
    ['tgi' as SimEngine, null, /unknown engine 'tgi'/],
  ] as const)('%s %s → one-line error', (engine, version, msg) => {
    expect(() => resolveProfile(engine, version)).toThrow(msg);
  });

  it('has one row per (engine, version)', () => {
    const keys = ENGINE_PROFILES.map((p) => `${p.engine}/${p.version}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe('metaserverBody', () => {
  const fields = {
    requestId: 'chatcmpl-3f9a0c1e2b7d4e5f8a6b9c0d1e2f3a4b',
    engineId: 'decode-engine-0',
    host: '10.0.0.21',
    port: 30000,
    blockIds: [12, 13],
    blockSize: 128,
    cachedTokens: 0,
  };
  it.each([
    ['v0.13', fields, 'vllm-ascend/layerwise-v0.13/metaserver-call.chat.json'],
    ['v0.15', fields, 'vllm-ascend/layerwise-v0.15/metaserver-call.chat.json'],
    ['v0.17', fields, 'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json'],
    // no external tokens: a flat [] even on ≥ v0.17
    [
      'v0.17',
      { ...fields, blockIds: [], cachedTokens: 256 },
      'vllm-ascend/layerwise-v0.17/metaserver-call.full-prefix-hit.json',
    ],
  ] as const)('%s equals the fixture', (shape, f, fixture) => {
    expect(metaserverBody(shape, f)).toEqual(fixtureBody(fixture));
  });
});
