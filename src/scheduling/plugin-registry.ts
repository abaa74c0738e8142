import type { PluginDefinition, PluginKind } from './plugin.js';
import { circuitBreakerFilter } from './plugins/circuit-breaker-filter.js';
import { engineMetricsScorer } from './plugins/engine-metrics-scorer.js';
import { kvPressureFilter } from './plugins/kv-pressure-filter.js';
import { leastLoadScorer } from './plugins/least-load-scorer.js';
import { maxScorePicker } from './plugins/max-score-picker.js';
import { powerOfTwoPicker } from './plugins/power-of-two-picker.js';
import { precisePrefixScorer } from './plugins/precise-prefix-scorer.js';
import { prefixAffinityScorer } from './plugins/prefix-affinity-scorer.js';
import { randomPicker } from './plugins/random-picker.js';
import { roundRobinPicker } from './plugins/round-robin-picker.js';
import { sessionAffinityScorer } from './plugins/session-affinity-scorer.js';

/** A plugin definition of any kind and params type, as a catalog holds it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyPluginDefinition = PluginDefinition<PluginKind, any>;

/** Every built-in scheduling plugin, by type string. The one place a new built-in is registered. */
export const schedulingPlugins: readonly PluginDefinition<PluginKind, never>[] = [
  circuitBreakerFilter,
  kvPressureFilter,
  leastLoadScorer,
  engineMetricsScorer,
  sessionAffinityScorer,
  prefixAffinityScorer,
  precisePrefixScorer,
  maxScorePicker,
  randomPicker,
  roundRobinPicker,
  powerOfTwoPicker,
] as unknown as readonly PluginDefinition<PluginKind, never>[];

/**
 * The plugins a config may name: the built-ins, plus those an embedding application registers
 * (`createCoordinator(config, { plugins })`). Immutable: `with` returns a new catalog, so two
 * coordinators in one process never see each other's plugins.
 */
export class PluginCatalog {
  private readonly byType: ReadonlyMap<string, PluginDefinition<PluginKind, unknown>>;

  constructor(definitions: readonly AnyPluginDefinition[]) {
    const byType = new Map<string, PluginDefinition<PluginKind, unknown>>();
    for (const d of definitions) {
      if (byType.has(d.type)) throw new Error(`scheduling plugin type '${d.type}' is registered twice`);
      byType.set(d.type, d as PluginDefinition<PluginKind, unknown>);
    }
    this.byType = byType;
  }

  /** This catalog plus `extra`; a type already registered (built-in or not) is an error. */
  with(extra: readonly AnyPluginDefinition[]): PluginCatalog {
    return extra.length === 0 ? this : new PluginCatalog([...this.byType.values(), ...extra]);
  }

  /** The definition registered under `type`, or undefined. */
  find(type: string): PluginDefinition<PluginKind, unknown> | undefined {
    return this.byType.get(type);
  }

  /** Registered type strings of one kind (for error messages and docs). */
  types(kind: PluginKind): string[] {
    return [...this.byType.values()].filter((p) => p.kind === kind).map((p) => p.type);
  }
}

/** The built-in plugins alone: what a config is checked against unless a catalog is given. */
export const builtinPlugins = new PluginCatalog(schedulingPlugins);

/** The built-in definition registered under `type`, or undefined. */
export function findPlugin(type: string): PluginDefinition<PluginKind, unknown> | undefined {
  return builtinPlugins.find(type);
}

/** Built-in type strings of one kind. */
export function pluginTypes(kind: PluginKind): string[] {
  return builtinPlugins.types(kind);
}
