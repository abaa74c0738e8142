import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

const errorsOf = (raw: unknown): string => {
  try {
    validateCoordinatorConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.join('\n');
    throw err;
  }
  return '';
};

const types = (profile: { scorers: { type: string }[]; picker: { type: string } }) =>
  `${profile.scorers.map((s) => s.type).join('+')}/${profile.picker.type}`;

describe('coordinator scheduling section', () => {
  it('defaults: prefix affinity on prefill and union, least-load on decode; fallback and plans from dispatch', () => {
    const c = validateCoordinatorConfig({});
    expect(types(c.scheduling.library.prefill)).toBe('prefix-affinity/max-score');
    expect(types(c.scheduling.library.decode)).toBe('least-load/max-score');
    expect(c.scheduling.library.fallback).toEqual({ union: false, degradedPrefill: false });
    expect(c.scheduling.library.planPreference).toEqual(['prefill_handoff_decode', 'concurrent_engine_sync']);
    expect(c.scheduling.scrape).toMatchObject({ mode: 'auto', enabled: false, intervalMs: 1000 });
    const f = validateCoordinatorConfig({
      dispatch: { fallbackToSingle: true, planPreference: ['concurrent_engine_sync'] },
    });
    expect(f.scheduling.library.fallback).toEqual({ union: true, degradedPrefill: true });
    expect(f.scheduling.library.planPreference).toEqual(['concurrent_engine_sync']);
  });

  it.each([
    [{ scheduling: { policy: 'round-robin' } }, '/round-robin', '/round-robin'],
    [{ scheduling: { policy: 'least-load' } }, 'least-load/max-score', 'least-load/max-score'],
    [{ scheduler: { policy: 'round-robin' } }, '/round-robin', '/round-robin'],
    [{ scheduler: { policy: 'least-in-flight' } }, 'least-load/max-score', 'least-load/max-score'],
    [
      { scheduler: { policy: 'round-robin' }, scheduling: { policy: 'prefix-affinity' } },
      'prefix-affinity/max-score',
      'least-load/max-score',
    ],
    [
      { scheduling: { policy: 'round-robin', decode: { scorers: [{ type: 'least-load' }] } } },
      '/round-robin',
      'least-load/max-score',
    ],
  ])('%j → prefill %s, decode %s', (raw, prefill, decode) => {
    const c = validateCoordinatorConfig(raw);
    expect(types(c.scheduling.library.prefill)).toBe(prefill);
    expect(types(c.scheduling.library.decode)).toBe(decode);
  });

  it('scraping turns on with a metrics plugin (auto), or explicitly', () => {
    const auto = validateCoordinatorConfig({
      scheduling: { decode: { scorers: [{ type: 'engine-metrics' }] } },
    });
    expect(auto.scheduling.scrape.enabled).toBe(true);
    const on = validateCoordinatorConfig({
      scheduling: { engineMetrics: { scrape: 'on', scrapeIntervalMs: 200, staleAfterMs: 900 } },
    });
    expect(on.scheduling.scrape).toMatchObject({ enabled: true, intervalMs: 200 });
    expect(on.scheduling.library.engineMetrics.staleAfterMs).toBe(900);
    const off = validateCoordinatorConfig({
      scheduling: { engineMetrics: { scrape: 'off' }, prefill: { filters: [{ type: 'kv-pressure' }] } },
    });
    expect(off.scheduling.scrape.enabled).toBe(false);
  });

  it.each([
    [{ scheduling: { policy: 'fastest' } }, 'scheduling.policy: expected one of'],
    [
      { scheduling: { prefill: { scorers: [{ type: 'least-load', weight: 'x' }] } } },
      'scheduling.prefill.scorers[0].weight',
    ],
    [
      { scheduling: { decode: { picker: { type: 'nope' } } } },
      "scheduling.decode.picker.type: unknown picker 'nope'",
    ],
    [
      { scheduling: { circuitBreaker: { failureThreshold: 0 } } },
      'scheduling.circuitBreaker.failureThreshold',
    ],
    [{ scheduling: { engineMetrics: { scrape: 'sometimes' } } }, 'scheduling.engineMetrics.scrape'],
    [{ scheduling: { admission: { bogus: 1 } } }, 'scheduling.admission'],
    [{ scheduling: 3 }, 'scheduling: expected object'],
  ])('%j → %s', (raw, expected) => {
    expect(errorsOf(raw)).toContain(expected);
  });
});
