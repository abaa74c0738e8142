import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

const P = { url: 'http://p.test:1', role: 'prefill', mode: 'direct', dispatchProfile: 'handoff' };
const D = { url: 'http://d.test:2', role: 'decode', mode: 'direct', dispatchProfile: 'handoff' };
const SG_P = { url: 'http://p.test:3', role: 'prefill', mode: 'direct', engine: 'sglang' };
const SG_D = { id: 'sg-d', url: 'http://d.test:4', role: 'decode', mode: 'direct', engine: 'sglang' };
const AFFINITY = { decode: { scorers: [{ type: 'prefix-affinity' }] } };

function warningsOf(raw: Record<string, unknown>): readonly string[] {
  return (validateCoordinatorConfig(raw).warnings ?? []).filter((w) => w.startsWith('decodeFirst'));
}

describe('decodeFirst section', () => {
  it('defaults: off, 0.8 of the prompt cached or at most 256 tokens to compute', () => {
    expect(validateCoordinatorConfig({}).decodeFirst).toEqual({
      enabled: false,
      minCachedFraction: 0.8,
      maxUncachedTokens: 256,
    });
  });

  it.each([
    [{ minCachedFraction: 1.5 }, 'decodeFirst.minCachedFraction: Too big'],
    [{ maxUncachedTokens: -1 }, 'decodeFirst.maxUncachedTokens: Too small'],
    [{ enabeld: true }, "decodeFirst: unknown key(s) 'enabeld'"],
  ])('%o → %s', (decodeFirst, issue) => {
    try {
      validateCoordinatorConfig({ decodeFirst });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.join('\n')).toContain(issue);
    }
  });

  it.each<[string, Record<string, unknown>, RegExp[]]>([
    ['off: nothing to say', { instances: [SG_P, SG_D] }, []],
    ['vLLM pair with a cache-aware decode scorer', { instances: [P, D], scheduling: AFFINITY, on: true }, []],
    [
      'SGLang decode: decode-first is off for it',
      { instances: [SG_P, SG_D], scheduling: AFFINITY, on: true },
      [/decode instance 'sg-d' is SGLang.*always take the prefill leg/],
    ],
    [
      'nothing predicts the decode cache: only maxUncachedTokens applies',
      { instances: [P, D], on: true },
      [/nothing predicts what the decode instances hold.*only maxUncachedTokens applies/],
    ],
    [
      'KV events on the decode count as a prediction',
      { instances: [P, { ...D, kvEvents: { endpoint: 'tcp://d.test:5557' } }], on: true },
      [],
    ],
  ])('%s', (_name, { on, ...raw }, want) => {
    const warnings = warningsOf({ ...raw, decodeFirst: { enabled: on === true } });
    expect(warnings).toHaveLength(want.length);
    want.forEach((re, i) => expect(warnings[i]).toMatch(re));
  });
});
