import type { ProfileConfig } from './config.js';
import type { Filter, Picker, Scorer, SchedulingServices, SelectionContext } from './plugin.js';
import { builtinPlugins, type PluginCatalog } from './plugin-registry.js';
import { circuitBreakerFilter } from './plugins/circuit-breaker-filter.js';
import type { SchedulableInstance } from './types.js';

interface NamedFilter {
  readonly type: string;
  readonly filter: Filter;
}

interface WeightedScorer {
  readonly type: string;
  readonly weight: number;
  readonly scorer: Scorer;
}

/** One role's pipeline: filters → weighted scorers → picker. Plugin instances (and their state) are per profile. */
export class RoleProfile {
  private readonly filters: NamedFilter[];
  private readonly scorers: WeightedScorer[];
  private readonly picker: Picker;

  constructor(
    config: ProfileConfig,
    services: SchedulingServices,
    options: { circuitBreaker: boolean; plugins?: PluginCatalog },
  ) {
    const plugins = options.plugins ?? builtinPlugins;
    const create = (type: string, params: unknown) => {
      const definition = plugins.find(type);
      if (!definition) throw new Error(`unknown scheduling plugin '${type}'`);
      return definition.create(params, services);
    };
    this.filters = config.filters.map((ref) => ({
      type: ref.type,
      filter: create(ref.type, ref.params) as Filter,
    }));
    if (options.circuitBreaker && !config.filters.some((ref) => ref.type === circuitBreakerFilter.type)) {
      this.filters.unshift({
        type: circuitBreakerFilter.type,
        filter: circuitBreakerFilter.create({}, services),
      });
    }
    this.scorers = config.scorers
      .filter((ref) => ref.weight > 0)
      .map((ref) => ({ type: ref.type, weight: ref.weight, scorer: create(ref.type, ref.params) as Scorer }));
    this.picker = create(config.picker.type, config.picker.params) as Picker;
  }

  /** Runs the filters; counts removed instances per filter type into `dropped`. */
  filter(
    ctx: SelectionContext,
    candidates: readonly SchedulableInstance[],
    dropped: Record<string, number>,
  ): readonly SchedulableInstance[] {
    let current = candidates;
    for (const { type, filter } of this.filters) {
      if (current.length === 0) break;
      const next = filter.filter(ctx, current);
      if (next.length !== current.length) dropped[type] = (dropped[type] ?? 0) + current.length - next.length;
      current = next;
    }
    return current;
  }

  /** Scores and picks among already-filtered candidates; notifies stateful scorers of the pick. */
  pick(ctx: SelectionContext, candidates: readonly SchedulableInstance[]): SchedulableInstance | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const total = new Float64Array(n);
    if (this.scorers.length > 0) {
      const scratch = new Float64Array(n);
      for (const { weight, scorer } of this.scorers) {
        scratch.fill(0);
        scorer.score(ctx, candidates, scratch);
        for (let i = 0; i < n; i++) total[i] = total[i]! + weight * scratch[i]!;
      }
    }
    const index = n === 1 ? 0 : this.picker.pick(ctx, candidates, total);
    const instance = candidates[index];
    if (!instance) return undefined;
    for (const { scorer } of this.scorers) scorer.onPicked?.(ctx, instance);
    return instance;
  }

  forget(instanceId: string): void {
    for (const { scorer } of this.scorers) scorer.forget?.(instanceId);
    this.picker.forget?.(instanceId);
  }
}
