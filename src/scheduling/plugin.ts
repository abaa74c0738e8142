import type { z } from 'zod';
import type { CircuitBreakers } from './circuit-breaker.js';
import type { Clock } from '../common/clock.js';
import type { EngineMetricsStore } from './engine-metrics.js';
import type { LoadTracker } from './load-tracker.js';
import type { PrefixIndex } from './prefix-index.js';
import type { RandomSource } from './seeded-random.js';
import type { InstanceRole, SchedulableInstance, SchedulingRequest } from './types.js';

/** Per-decision view given to plugins. Hashes are computed at most once per decision and block size. */
export interface SelectionContext {
  readonly request: SchedulingRequest;
  /** Role whose profile is running. */
  readonly role: InstanceRole;
  readonly nowMs: number;
  readonly random: RandomSource;
  /** Chained block hashes of the rendered prompt (token ids if given, else text blocks); memoised. */
  blockHashes(blockSize: number): readonly number[];
  /** A scorer's estimate of prompt tokens cached on an instance; reported in the decision. */
  noteCachedTokens(instanceId: string, tokens: number): void;
}

/** Shared state plugins may read (and stateful plugins may update through their hooks). */
export interface SchedulingServices {
  readonly loadTracker: LoadTracker;
  readonly engineMetrics: EngineMetricsStore;
  readonly breakers: CircuitBreakers;
  readonly clock: Clock;
  /** Seeded source for plugins without their own seed. */
  readonly random: RandomSource;
  /**
   * Makes a stateful scorer's routed-history index. Replicas that share routing state give one that
   * publishes each record; called in the same order on every replica built from the same config.
   */
  readonly newPrefixIndex?: (capacityBlocks: number) => PrefixIndex;
}

/** Drops candidates that must not be picked. Must return a subset of `candidates` (order kept). */
export interface Filter {
  filter(ctx: SelectionContext, candidates: readonly SchedulableInstance[]): readonly SchedulableInstance[];
}

/**
 * Writes one score in [0, 1] per candidate into `out` (higher is better). Stateful scorers may observe
 * the final pick and forget deregistered instances.
 */
export interface Scorer {
  score(ctx: SelectionContext, candidates: readonly SchedulableInstance[], out: Float64Array): void;
  onPicked?(ctx: SelectionContext, instance: SchedulableInstance): void;
  forget?(instanceId: string): void;
}

/** Returns the index of the chosen candidate given the weighted score sums, or -1 for no candidates. */
export interface Picker {
  pick(ctx: SelectionContext, candidates: readonly SchedulableInstance[], scores: Float64Array): number;
  forget?(instanceId: string): void;
}

export type PluginKind = 'filter' | 'scorer' | 'picker';
type PluginOf<K extends PluginKind> = K extends 'filter' ? Filter : K extends 'scorer' ? Scorer : Picker;

/** One entry of the plugin list: a type string, its params schema, and a factory. */
export interface PluginDefinition<K extends PluginKind = PluginKind, P = unknown> {
  readonly type: string;
  readonly kind: K;
  readonly description: string;
  readonly params: z.ZodType<P>;
  create(params: P, services: SchedulingServices): PluginOf<K>;
}

/** Identity helper that keeps the params type of a definition. */
export function definePlugin<K extends PluginKind, P>(
  definition: PluginDefinition<K, P>,
): PluginDefinition<K, P> {
  return definition;
}

/** Load divided by capacity weight (weight ≤ 0 or missing counts as 1). */
export function instanceWeight(instance: SchedulableInstance): number {
  const w = instance.weight;
  return w !== undefined && w > 0 && Number.isFinite(w) ? w : 1;
}

/** Min-max normalises costs into scores in [0, 1], lowest cost → 1; equal costs → all 1. */
export function scoresFromCosts(costs: Float64Array, out: Float64Array): void {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < costs.length; i++) {
    const c = costs[i]!;
    if (c < min) min = c;
    if (c > max) max = c;
  }
  const span = max - min;
  for (let i = 0; i < costs.length; i++) out[i] = span > 0 ? (max - costs[i]!) / span : 1;
}
