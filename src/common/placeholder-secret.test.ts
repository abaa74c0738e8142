import { describe, expect, it } from 'vitest';
import { parsePeerSecrets } from './peer-secrets.js';
import { placeholderSecretProblem, placeholderSecretProblems } from './placeholder-secret.js';

describe('placeholderSecretProblem', () => {
  it.each([
    ['replace-me-admin-token', true],
    ['  Replace-Me-key', true],
    ['a-real-secret-replace-me', false],
    ['generated-0123456789abcdef', false],
    [null, false],
    [undefined, false],
  ])('%j → refused: %s', (value, refused) => {
    const problem = placeholderSecretProblem('server.apiKeys[0]', value);
    expect(problem !== undefined).toBe(refused);
    if (refused) expect(problem).toMatch(/^server\.apiKeys\[0\]: still the "replace-me…" example value/);
  });

  it('names each refused value and only those', () => {
    expect(
      placeholderSecretProblems([
        ['a', 'replace-me-1'],
        ['b', 'fine-secret'],
        ['c', 'replace-me-2'],
      ]).map((p) => p.split(':')[0]),
    ).toEqual(['a', 'c']);
  });

  it('is refused as a peer secret too, naming its position and never its value', () => {
    expect(() =>
      parsePeerSecrets('a-good-secret-0123456789,replace-me-peer-secret-0123', 'MOTOR_PEER_SECRET'),
    ).toThrow(/^MOTOR_PEER_SECRET: peer secret #2: still the "replace-me…" example value/);
  });
});
