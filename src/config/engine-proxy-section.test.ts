import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

describe('engineProxy peer secret', () => {
  const cases: Array<{ name: string; section: unknown; env: NodeJS.ProcessEnv; want: unknown }> = [
    { name: 'none', section: undefined, env: {}, want: null },
    {
      name: 'from the environment',
      section: { peerSecretEnv: 'S' },
      env: { S: 'x'.repeat(16) },
      want: { secrets: ['x'.repeat(16)] },
    },
    { name: 'from a file', section: { peerSecretFile: '/run/s' }, env: {}, want: { file: '/run/s' } },
    {
      name: 'unset variable',
      section: { peerSecretEnv: 'S' },
      env: {},
      want: 'engineProxy.peerSecretEnv: environment variable S is unset or empty',
    },
    {
      name: 'two, comma-separated',
      section: { peerSecretEnv: 'S' },
      env: { S: `${'n'.repeat(16)},${'o'.repeat(16)}` },
      want: { secrets: ['n'.repeat(16), 'o'.repeat(16)] },
    },
    {
      name: 'too short',
      section: { peerSecretEnv: 'S' },
      env: { S: 'short' },
      want: 'engineProxy.peerSecretEnv: S: peer secret #1 is shorter than 16 characters',
    },
    {
      name: 'both',
      section: { peerSecretEnv: 'S', peerSecretFile: '/run/s' },
      env: { S: 'x'.repeat(16) },
      want: 'engineProxy: set peerSecretEnv or peerSecretFile, not both',
    },
    {
      name: 'not a variable name',
      section: { peerSecretEnv: 'A-B' },
      env: {},
      want: 'engineProxy.peerSecretEnv: must be an environment variable name',
    },
  ];
  it.each(cases)('$name', ({ section, env, want }) => {
    const raw = section === undefined ? {} : { engineProxy: section };
    if (typeof want === 'string') {
      expect(() => validateCoordinatorConfig(raw, env)).toThrow(ConfigError);
      expect(() => validateCoordinatorConfig(raw, env)).toThrow(want);
    } else {
      expect(validateCoordinatorConfig(raw, env).peerSecret).toEqual(want);
    }
  });
});
