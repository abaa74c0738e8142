import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { parseSchedulingConfig, SchedulingConfigError } from './config.js';
import { definePlugin } from './plugin.js';
import { builtinPlugins } from './plugin-registry.js';
import { Scheduler } from './scheduler.js';

const zoneFilter = definePlugin({
  type: 'zone',
  kind: 'filter',
  description: 'keeps instances whose id starts with the zone',
  params: z.strictObject({ zone: z.string() }),
  create: ({ zone }) => ({ filter: (_ctx, candidates) => candidates.filter((i) => i.id.startsWith(zone)) }),
});
const catalog = builtinPlugins.with([zoneFilter]);

describe('PluginCatalog', () => {
  it('adds plugins without changing the built-ins (per coordinator)', () => {
    expect(catalog.find('zone')).toBe(zoneFilter);
    expect(builtinPlugins.find('zone')).toBeUndefined();
    expect(catalog.types('filter')).toEqual([...builtinPlugins.types('filter'), 'zone']);
    expect(builtinPlugins.with([])).toBe(builtinPlugins);
  });

  it.each([
    ['a built-in type', [{ ...zoneFilter, type: 'least-load' }]],
    ['the same type twice', [zoneFilter, zoneFilter]],
  ])('refuses %s', (_name, extra) => {
    expect(() => builtinPlugins.with(extra)).toThrow(
      /scheduling plugin type '(least-load|zone)' is registered twice/,
    );
  });

  it.each([
    [
      { prefill: { filters: [{ type: 'zone', params: { zone: 'eu' } }] } },
      builtinPlugins,
      "prefill.filters[0].type: unknown filter 'zone' (known: circuit-breaker, kv-pressure)",
    ],
    [
      { prefill: { filters: [{ type: 'zone', params: {} }] } },
      catalog,
      'prefill.filters[0].params.zone: expected string',
    ],
    [{ prefill: { picker: { type: 'zone' } } }, catalog, "prefill.picker.type: unknown picker 'zone'"],
  ])('parseSchedulingConfig(%j) with its catalog: %s', (input, plugins, message) => {
    expect(() => parseSchedulingConfig(input, '', plugins)).toThrow(SchedulingConfigError);
    expect(() => parseSchedulingConfig(input, '', plugins)).toThrow(message);
  });

  it('a Scheduler runs a registered plugin', () => {
    const config = { prefill: { filters: [{ type: 'zone', params: { zone: 'eu' } }] } };
    const scheduler = new Scheduler(config, { plugins: catalog });
    const instances = ['us-p', 'eu-p'].map((id) => ({
      id,
      role: 'prefill' as const,
      url: `http://${id}`,
      dispatch_capabilities: ['prefill_handoff_decode'],
    }));
    const decode = {
      id: 'd',
      role: 'decode' as const,
      url: 'http://d',
      dispatch_capabilities: ['prefill_handoff_decode'],
    };
    for (let i = 0; i < 4; i++) {
      const decision = scheduler.selectPair({ model: 'm', promptTokens: 1000 }, [...instances, decode]);
      expect(decision).toMatchObject({ kind: 'pair', prefill: { id: 'eu-p' } });
    }
  });
});
