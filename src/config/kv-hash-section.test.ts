import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

const group = (over: Record<string, unknown> = {}) => ({
  name: 'qwen3',
  models: ['Qwen/Qwen3-8B'],
  tokenizer: { path: '/models/qwen3' },
  blockHash: { seed: '0' },
  ...over,
});

function issuesOf(kvHash: unknown): string[] {
  try {
    validateCoordinatorConfig({ kvHash });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
}

describe('kvHash section', () => {
  it('defaults: no groups; a group gets vLLM’s defaults (sha256, block size 16) and a 1024-prompt cache', () => {
    expect(validateCoordinatorConfig({}).kvHash).toEqual({ groups: [] });
    expect(validateCoordinatorConfig({ kvHash: { groups: [group()] } }).kvHash.groups[0]).toEqual({
      name: 'qwen3',
      models: ['Qwen/Qwen3-8B'],
      tokenizer: { path: '/models/qwen3', cacheEntries: 1024 },
      blockHash: { algo: 'sha256', blockSize: 16, seed: '0' },
    });
  });

  it.each([
    [group({ blockHash: {} }), 'kvHash.groups[0].blockHash.seed: expected string, received undefined'],
    [
      group({ blockHash: { seed: '0', algo: 'xxhash' } }),
      'kvHash.groups[0].blockHash.algo: "xxhash" is not one of sha256, sha256_cbor',
    ],
    [group({ blockHash: { seed: '0', blockSize: 0 } }), 'kvHash.groups[0].blockHash.blockSize: Too small'],
    [group({ models: [] }), 'kvHash.groups[0].models: Too small'],
    [group({ tokenizer: {} }), 'kvHash.groups[0].tokenizer.path: expected string, received undefined'],
  ])('%j → %s', (g, issue) => {
    expect(issuesOf({ groups: [g] }).join('\n')).toContain(issue);
  });

  it('group names are unique', () => {
    expect(issuesOf({ groups: [group(), group()] })).toContain(
      "kvHash.groups[1].name: duplicate group name 'qwen3'",
    );
  });
});
