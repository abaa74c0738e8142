import type { PluginDefinition, PluginKind } from './plugin.js';
import { circuitBreakerFilter } from './plugins/circuit-breaker-filter.js';
import { engineMetricsScorer } from './plugins/engine-metrics-scorer.js';
import { kvPressureFilter } from './plugins/kv-pressure-filter.js';
import { leastLoadScorer } from './plugins/least-load-scorer.js';
import { maxScorePicker } from './plugins/max-score-picker.js';
import { powerOfTwoPicker } from './plugins/power-of-two-picker.js';
import { prefixAffinityScorer } from './plugins/prefix-affinity-scorer.js';
import { randomPicker } from './plugins/random-picker.js';
import { roundRobinPicker } from './plugins/round-robin-picker.js';
import { sessionAffinityScorer } from './plugins/session-affinity-scorer.js';

/** Every scheduling plugin, by type string. The one place a new plugin is registered. */
export const schedulingPlugins: readonly PluginDefinition<PluginKind, never>[] = [
  circuitBreakerFilter,
  kvPressureFilter,
  leastLoadScorer,
  engineMetricsScorer,
  sessionAffinityScorer,
  prefixAffinityScorer,
  maxScorePicker,
  randomPicker,
  roundRobinPicker,
  powerOfTwoPicker,
] as unknown as readonly PluginDefinition<PluginKind, never>[];

const byType = new Map<string, PluginDefinition<PluginKind, unknown>>(
  schedulingPlugins.map((p) => [p.type, p as PluginDefinition<PluginKind, unknown>]),
);

/** The definition registered under `type`, or undefined. */
export function findPlugin(type: string): PluginDefinition<PluginKind, unknown> | undefined {
  return byType.get(type);
}

/** Registered type strings of one kind (for error messages and docs). */
export function pluginTypes(kind: PluginKind): string[] {
  return schedulingPlugins.filter((p) => p.kind === kind).map((p) => p.type);
}
