import { describe, expect, it } from 'vitest';
import { parseSchedulingConfig, SchedulingConfigError } from './config.js';

describe('parseSchedulingConfig', () => {
  it('fills defaults', () => {
    const c = parseSchedulingConfig({});
    expect(c.prefill.scorers).toEqual([
      { type: 'prefix-affinity', weight: 1, params: expect.objectContaining({ blockSize: 16 }) },
    ]);
    expect(c.decode.picker).toEqual({ type: 'max-score', params: {} });
    expect(c.fallback).toEqual({ union: true, degradedPrefill: true });
    expect(c.circuitBreaker.failureThreshold).toBe(5);
    expect(c.admission.maxConcurrent).toBe(1024);
  });

  it('validates plugin params with the plugin schema and fills their defaults', () => {
    const c = parseSchedulingConfig({
      prefill: { scorers: [{ type: 'prefix-affinity', params: { blockSize: 32 } }] },
    });
    expect(c.prefill.scorers[0]!.params).toMatchObject({ blockSize: 32, capacityBlocks: 32768 });
  });

  it.each([
    [
      { prefill: { scorers: [{ type: 'least-load' }, { type: 'least-load', weight: 'high' }] } },
      'prefill.scorers[1].weight: expected number',
    ],
    [
      { decode: { picker: { type: 'nope' } } },
      "decode.picker.type: unknown picker 'nope' (known: max-score, random, round-robin, power-of-two)",
    ],
    [{ union: { filters: [{ type: 'least-load' }] } }, "union.filters[0].type: unknown filter 'least-load'"],
    [
      { prefill: { scorers: [{ type: 'prefix-affinity', params: { blockSize: 0 } }] } },
      'prefill.scorers[0].params.blockSize:',
    ],
    [
      { prefill: { scorers: [{ type: 'least-load', params: { bogus: 1 } }] } },
      'prefill.scorers[0].params: Unrecognized key',
    ],
    [{ planPreference: ['teleport'] }, 'planPreference[0]:'],
    [{ circuitBreaker: { failureThreshold: -1 } }, 'circuitBreaker.failureThreshold:'],
    [{ surprise: true }, '(root): Unrecognized key'],
  ])('rejects %j naming the path', (input, expected) => {
    let error: unknown;
    try {
      parseSchedulingConfig(input);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SchedulingConfigError);
    expect((error as SchedulingConfigError).issues.join('\n')).toContain(expected);
  });

  it('prefixes paths when embedded in a larger config', () => {
    expect(() =>
      parseSchedulingConfig({ prefill: { scorers: [{ type: 'least-load', weight: 'x' }] } }, 'scheduling'),
    ).toThrow('scheduling.prefill.scorers[0].weight: expected number');
  });
});
