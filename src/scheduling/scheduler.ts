import { dispatchPlansFromCapabilities, type DispatchPlan } from '../protocol/index.js';
import { CircuitBreakers, type CircuitState } from './circuit-breaker.js';
import { systemClock, type Clock } from '../common/clock.js';
import { parseSchedulingConfig, type SchedulingConfig } from './config.js';
import { EngineMetricsStore } from './engine-metrics.js';
import { LoadTracker } from './load-tracker.js';
import type { SchedulingServices, SelectionContext } from './plugin.js';
import { textBlockHashes, tokenBlockHashes } from './prefix-hash.js';
import { canPair, pairableDecodes, unpairedReason } from './pair-compatibility.js';
import type { PluginCatalog } from './plugin-registry.js';
import { RoleProfile } from './role-profile.js';
import { seededRandom, type RandomSource } from './seeded-random.js';
import type {
  InstanceRole,
  SchedulableInstance,
  SchedulingDecision,
  SchedulingFailure,
  SchedulingRequest,
  SingleDecision,
  SingleReason,
} from './types.js';

export interface SchedulerOptions {
  readonly clock?: Clock;
  /** Overrides `config.seed`; default `Math.random`. */
  readonly random?: RandomSource;
  /** Share state with other components (e.g. one tracker for several schedulers); created otherwise. */
  readonly loadTracker?: LoadTracker;
  readonly engineMetrics?: EngineMetricsStore;
  readonly breakers?: CircuitBreakers;
  /** Forwarded to the circuit breakers (metrics, one log line per change). */
  readonly onCircuitStateChange?: (instanceId: string, from: CircuitState, to: CircuitState) => void;
  /** Forwarded to the engine-metrics store: first missing/stale read per instance (log once). */
  readonly onMetricsFallback?: (instanceId: string, why: 'missing' | 'stale') => void;
  /** Plugin types the config may name; default the built-ins. */
  readonly plugins?: PluginCatalog;
  /** Makes the routed-history index of each cache-aware scorer (shared between replicas); default a local one. */
  readonly newPrefixIndex?: SchedulingServices['newPrefixIndex'];
}

/** Counters for metrics. */
export interface SchedulerStats {
  pairs: number;
  singles: Record<SingleDecision['reason'], number>;
  failures: Record<SchedulingFailure['code'], number>;
}

/** Options of {@link Scheduler.explain}. */
export interface ExplainOptions {
  /** Take every instance as available (skip filters): the route the fleet's topology allows. */
  readonly assumeAvailable?: boolean;
}

/** The registered fleet an explanation was made for (for messages naming what is missing). */
export interface FleetSummary {
  readonly prefill: number;
  readonly decode: number;
  readonly union: number;
  /** Plans the prefill (decode) instances advertise, sorted. */
  readonly prefillPlans: readonly DispatchPlan[];
  readonly decodePlans: readonly DispatchPlan[];
}

type Explained =
  | { readonly kind: 'pair'; readonly plan: DispatchPlan }
  | { readonly kind: 'single'; readonly reason: SingleReason }
  | { readonly kind: 'failure'; readonly failure: SchedulingFailure };

/** What {@link Scheduler.explain} answers: the kind of route (and plan) a request would get, or why none. */
export type RouteExplanation = Explained & { readonly fleet: FleetSummary };

/** How {@link Scheduler.decide} turns candidates into its answer (picking, or only explaining). */
interface DecisionSteps<T> {
  /** The candidates of `role` its filters keep; removed ones are counted into `dropped` per filter. */
  available(
    ctx: DecisionContext,
    role: InstanceRole,
    candidates: readonly SchedulableInstance[],
    dropped: Record<string, number>,
  ): readonly SchedulableInstance[];
  /** One of `candidates` (filtered, of `role`'s profile) serves the request; undefined when none can. */
  single(
    ctx: DecisionContext,
    role: 'union' | 'prefill',
    candidates: readonly SchedulableInstance[],
    reason: SingleReason,
  ): T | undefined;
  /** A prefill and a decode sharing a plan of `shared`; every `prefill` has a decode it can pair with. */
  pair(
    ctx: DecisionContext,
    prefill: readonly SchedulableInstance[],
    decode: readonly SchedulableInstance[],
    shared: ReadonlySet<DispatchPlan>,
    dropped: Record<string, number>,
  ): T;
  failure(failure: SchedulingFailure): T;
}

const EMPTY_PLANS: ReadonlySet<DispatchPlan> = new Set();

class DecisionContext implements SelectionContext {
  role: InstanceRole = 'prefill';
  readonly cached = new Map<string, number>();
  private readonly hashes = new Map<number, readonly number[]>();

  constructor(
    readonly request: SchedulingRequest,
    readonly nowMs: number,
    readonly random: RandomSource,
  ) {}

  blockHashes(blockSize: number): readonly number[] {
    let hashes = this.hashes.get(blockSize);
    if (!hashes) {
      const { promptTokenIds, promptText, cacheSalt } = this.request;
      hashes =
        promptTokenIds !== undefined
          ? tokenBlockHashes(promptTokenIds, blockSize, cacheSalt)
          : promptText !== undefined
            ? textBlockHashes(promptText, blockSize, cacheSalt)
            : [];
      this.hashes.set(blockSize, hashes);
    }
    return hashes;
  }

  noteCachedTokens(instanceId: string, tokens: number): void {
    this.cached.set(instanceId, tokens);
  }

  cachedFor(instance: SchedulableInstance): number {
    return this.cached.get(instance.id) ?? 0;
  }
}

function planList(plans: Iterable<DispatchPlan>): string {
  const list = [...plans].sort();
  return list.length === 0 ? 'none' : list.join(', ');
}

/**
 * Capability-aware pair selection over a role-partitioned fleet (conformance 12–16), O(instances) per
 * decision. Create one per coordinator; `selectPair` is synchronous and allocation-light.
 */
export class Scheduler {
  readonly config: SchedulingConfig;
  readonly loadTracker: LoadTracker;
  readonly engineMetrics: EngineMetricsStore;
  readonly breakers: CircuitBreakers;
  readonly stats: SchedulerStats = {
    pairs: 0,
    singles: { union: 0, degraded_prefill: 0, short_prompt: 0, one_instance: 0 },
    failures: { no_instances: 0, no_available_instance: 0, no_compatible_pair: 0 },
  };
  private readonly clock: Clock;
  private readonly random: RandomSource;
  private readonly profiles: Record<InstanceRole, RoleProfile>;
  private readonly planCache = new WeakMap<readonly string[], ReadonlySet<DispatchPlan>>();

  /** `config` may be raw (validated here) or the output of {@link parseSchedulingConfig}. */
  constructor(config: unknown = {}, options: SchedulerOptions = {}) {
    this.config = parseSchedulingConfig(config, '', options.plugins);
    this.clock = options.clock ?? systemClock;
    this.random =
      options.random ??
      (this.config.seed !== undefined ? seededRandom(this.config.seed) : () => Math.random());
    this.loadTracker = options.loadTracker ?? new LoadTracker();
    this.engineMetrics =
      options.engineMetrics ??
      new EngineMetricsStore({
        staleAfterMs: this.config.engineMetrics.staleAfterMs,
        clock: this.clock,
        onFirstFallback: options.onMetricsFallback,
      });
    const cb = this.config.circuitBreaker;
    this.breakers =
      options.breakers ??
      new CircuitBreakers({
        failureThreshold: cb.failureThreshold,
        openMs: cb.openMs,
        halfOpenMaxProbes: cb.halfOpenMaxProbes,
        clock: this.clock,
        onStateChange: options.onCircuitStateChange,
      });
    const services: SchedulingServices = {
      loadTracker: this.loadTracker,
      engineMetrics: this.engineMetrics,
      breakers: this.breakers,
      clock: this.clock,
      random: this.random,
      ...(options.newPrefixIndex && { newPrefixIndex: options.newPrefixIndex }),
    };
    const profileOptions = { circuitBreaker: cb.enabled, plugins: options.plugins };
    this.profiles = {
      prefill: new RoleProfile(this.config.prefill, services, profileOptions),
      decode: new RoleProfile(this.config.decode, services, profileOptions),
      union: new RoleProfile(this.config.union, services, profileOptions),
    };
  }

  /**
   * Chooses where a request runs: a P/D pair sharing a plan, a single instance (union, degraded prefill,
   * short prompt), or a typed failure whose message names the missing capability. Never pairs
   * instances without a shared plan and never returns an instance a filter removed (open circuit).
   */
  selectPair(request: SchedulingRequest, instances: readonly SchedulableInstance[]): SchedulingDecision {
    return this.decide(new DecisionContext(request, this.clock.now(), this.random), instances, this.picking);
  }

  /**
   * One instance for a request that has no P/D split (no generation: embeddings, tokenize, score): the
   * first role of `roles` with an instance its filters keep, picked by that role's profile (so load,
   * breakers and scorers apply as to any leg of that role). A failure names what was missing.
   */
  selectOne(
    request: SchedulingRequest,
    instances: readonly SchedulableInstance[],
    roles: readonly InstanceRole[],
  ): SingleDecision | SchedulingFailure {
    const ctx = new DecisionContext(request, this.clock.now(), this.random);
    const dropped: Record<string, number> = {};
    let registered = 0;
    for (const role of roles) {
      const ofRole = instances.filter((i) => i.role === role);
      registered += ofRole.length;
      if (ofRole.length === 0) continue;
      const candidates = this.picking.available(ctx, role, ofRole, dropped);
      ctx.role = role;
      const instance = this.profiles[role].pick(ctx, candidates);
      if (instance) return this.singleOn(ctx, instance, 'one_instance');
    }
    const failure =
      registered === 0
        ? failureOf('no_instances', `no ${roles.join(' or ')} instance is registered`)
        : unavailable(dropped, `every ${roles.join(' and ')} instance is unavailable`);
    this.stats.failures[failure.code] += 1;
    return failure;
  }

  /**
   * What {@link selectPair} would decide, without deciding: the route kind and plan, or the failure.
   * Side-effect free: no picker or scorer runs (round-robin positions, affinity learning and random
   * draws stay put), no circuit-breaker probe slot is taken, no stats are counted. Filters, which only
   * read state, run unless `assumeAvailable` (the fleet's topology, as `/ready` reports it).
   */
  explain(
    request: SchedulingRequest,
    instances: readonly SchedulableInstance[],
    options: ExplainOptions = {},
  ): RouteExplanation {
    const ctx = new DecisionContext(request, this.clock.now(), this.random);
    const steps = options.assumeAvailable ? this.explainingTopology : this.explaining;
    return { ...this.decide(ctx, instances, steps), fleet: this.fleetOf(instances) };
  }

  /**
   * The routing rules, once, for both {@link selectPair} and {@link explain}: `steps` say how the
   * candidates of a role are filtered and what choosing a single instance or a pair produces.
   */
  private decide<T>(
    ctx: DecisionContext,
    instances: readonly SchedulableInstance[],
    steps: DecisionSteps<T>,
  ): T {
    const { request } = ctx;
    const prefill: SchedulableInstance[] = [];
    const decode: SchedulableInstance[] = [];
    const union: SchedulableInstance[] = [];
    for (const instance of instances) {
      if (instance.role === 'prefill') prefill.push(instance);
      else if (instance.role === 'decode') decode.push(instance);
      else if (instance.role === 'union') union.push(instance);
    }
    if (prefill.length + decode.length + union.length === 0) {
      return steps.failure(failureOf('no_instances', 'no prefill, decode or union instance is registered'));
    }
    const dropped: Record<string, number> = {};
    const { fallback, disaggregation } = this.config;

    let unionCandidates: readonly SchedulableInstance[] | undefined;
    const single = (reason: SingleDecision['reason']): T | undefined => {
      unionCandidates ??= steps.available(ctx, 'union', union, dropped);
      return steps.single(ctx, 'union', unionCandidates, reason);
    };

    if (union.length > 0 && prefill.length === 0 && decode.length === 0) {
      return single('union') ?? steps.failure(unavailable(dropped, 'every union instance is unavailable'));
    }
    if (
      disaggregation.mode === 'conditional' &&
      union.length > 0 &&
      request.promptTokens <= disaggregation.shortPromptTokens
    ) {
      const decision = single('short_prompt');
      if (decision) return decision;
    }

    // P/D: filter each side, then restrict to instances sharing a plan with the other side.
    const prefillAvailable = steps.available(ctx, 'prefill', prefill, dropped);
    const decodeAvailable = steps.available(ctx, 'decode', decode, dropped);
    const prefillPlans = this.planUnion(prefillAvailable);
    const decodePlans = this.planUnion(decodeAvailable);
    const shared = new Set<DispatchPlan>();
    for (const plan of prefillPlans) if (decodePlans.has(plan)) shared.add(plan);
    // Only prefills with a decode to pair with: a shared plan, engine kind and KV connector.
    const hasDecode = shared.size > 0 ? pairableDecodes(decodeAvailable, (i) => this.plans(i)) : undefined;
    const pairable = hasDecode ? prefillAvailable.filter(hasDecode) : [];
    if (pairable.length > 0) return steps.pair(ctx, pairable, decodeAvailable, shared, dropped);

    // No pair. Union fallback (conformance 14), then degraded prefill-only (conformance 15).
    if (union.length > 0 && fallback.union) {
      const decision = single('union');
      if (decision) return decision;
    }
    if (
      prefill.length > 0 &&
      decodeAvailable.length === 0 &&
      prefillAvailable.length > 0 &&
      fallback.degradedPrefill
    ) {
      const decision = steps.single(ctx, 'prefill', prefillAvailable, 'degraded_prefill');
      if (decision) return decision;
    }
    const unpaired = shared.size > 0 ? unpairedReason(prefillAvailable, decodeAvailable) : undefined;
    if (unpaired) return steps.failure(failureOf('no_compatible_pair', unpaired, [], dropped));
    return steps.failure(
      this.noRoute(prefill, decode, prefillAvailable, decodeAvailable, prefillPlans, decodePlans, dropped),
    );
  }

  /** Why no route exists, given what each side has (registered) and keeps (after filters). */
  private noRoute(
    prefill: readonly SchedulableInstance[],
    decode: readonly SchedulableInstance[],
    prefillAvailable: readonly SchedulableInstance[],
    decodeAvailable: readonly SchedulableInstance[],
    prefillPlans: ReadonlySet<DispatchPlan>,
    decodePlans: ReadonlySet<DispatchPlan>,
    dropped: Record<string, number>,
  ): SchedulingFailure {
    if (
      prefill.length > 0 &&
      decode.length > 0 &&
      prefillAvailable.length > 0 &&
      decodeAvailable.length > 0
    ) {
      return incompatible(prefillPlans, decodePlans, dropped);
    }
    if (prefill.length > 0 && decode.length > 0) {
      // Statically compatible or not, one side is entirely unavailable: say which.
      const staticShared = [...this.planUnion(prefill)].some((plan) => this.planUnion(decode).has(plan));
      if (!staticShared) return incompatible(this.planUnion(prefill), this.planUnion(decode), dropped);
      const side = prefillAvailable.length === 0 ? 'prefill' : 'decode';
      return unavailable(dropped, `every ${side} instance is unavailable`);
    }
    if (decode.length === 0 && prefill.length > 0) {
      return unavailable(
        dropped,
        prefillAvailable.length === 0
          ? 'every prefill instance is unavailable'
          : 'no decode instance is registered and degraded prefill-only dispatch is disabled',
        'no_instances',
      );
    }
    return unavailable(
      dropped,
      decodeAvailable.length === 0 && decode.length > 0
        ? 'every decode instance is unavailable and no prefill instance is registered'
        : 'no prefill instance is registered',
      decodeAvailable.length === 0 && decode.length > 0 ? 'no_available_instance' : 'no_instances',
    );
  }

  /** {@link selectPair}'s steps: filter, score and pick; picks take breaker probes and count in stats. */
  private readonly picking: DecisionSteps<SchedulingDecision> = {
    available: (ctx, role, candidates, dropped) => {
      ctx.role = role;
      return this.profiles[role].filter(ctx, candidates, dropped);
    },
    single: (ctx, role, candidates, reason) => {
      ctx.role = role;
      const instance = this.profiles[role].pick(ctx, candidates);
      return instance ? this.singleOn(ctx, instance, reason) : undefined;
    },
    pair: (ctx, prefillAvailable, decodeAvailable, _shared, dropped) => {
      ctx.role = 'prefill';
      const p = this.profiles.prefill.pick(ctx, prefillAvailable);
      const pPlans = p ? this.plans(p) : EMPTY_PLANS;
      ctx.role = 'decode';
      const d = p
        ? this.profiles.decode.pick(
            ctx,
            decodeAvailable.filter((instance) => this.sharesAny(instance, pPlans) && canPair(p, instance)),
          )
        : undefined;
      if (!p || !d) return this.picking.failure(unavailable(dropped, 'a picker returned no instance'));
      const dPlans = this.plans(d);
      const plan =
        this.config.planPreference.find((x) => pPlans.has(x) && dPlans.has(x)) ??
        [...pPlans].find((x) => dPlans.has(x))!;
      this.breakers.onPicked(p.id);
      this.breakers.onPicked(d.id);
      this.stats.pairs += 1;
      const [cachedPromptTokens, decodeCachedPromptTokens] = [ctx.cachedFor(p), ctx.cachedFor(d)];
      return { kind: 'pair', plan, prefill: p, decode: d, cachedPromptTokens, decodeCachedPromptTokens };
    },
    failure: (failure) => {
      this.stats.failures[failure.code] += 1;
      return failure;
    },
  };

  /** {@link explain}'s steps: the same filters, then only the kind of route (no pick). */
  private readonly explaining: DecisionSteps<Explained> = {
    available: this.picking.available,
    single: (_ctx, _role, candidates, reason) =>
      candidates.length > 0 ? { kind: 'single', reason } : undefined,
    pair: (_ctx, _prefill, _decode, shared) => ({
      kind: 'pair',
      plan: this.config.planPreference.find((plan) => shared.has(plan)) ?? [...shared][0]!,
    }),
    failure: (failure) => ({ kind: 'failure', failure }),
  };

  /** {@link explain} with every instance taken as available (no filter runs). */
  private readonly explainingTopology: DecisionSteps<Explained> = {
    ...this.explaining,
    available: (_ctx, _role, candidates) => candidates,
  };

  private fleetOf(instances: readonly SchedulableInstance[]): FleetSummary {
    const byRole = { prefill: [] as SchedulableInstance[], decode: [] as SchedulableInstance[], union: 0 };
    for (const instance of instances) {
      if (instance.role === 'union') byRole.union += 1;
      else if (instance.role === 'prefill' || instance.role === 'decode')
        byRole[instance.role].push(instance);
    }
    return {
      prefill: byRole.prefill.length,
      decode: byRole.decode.length,
      union: byRole.union,
      prefillPlans: [...this.planUnion(byRole.prefill)].sort(),
      decodePlans: [...this.planUnion(byRole.decode)].sort(),
    };
  }

  /** Drops all per-instance state (call when the registry removes an instance). */
  forgetInstance(instanceId: string): void {
    for (const profile of Object.values(this.profiles)) profile.forget(instanceId);
    this.breakers.forget(instanceId);
    this.engineMetrics.forget(instanceId);
  }

  private singleOn(
    ctx: DecisionContext,
    instance: SchedulableInstance,
    reason: SingleDecision['reason'],
  ): SingleDecision {
    this.breakers.onPicked(instance.id);
    this.stats.singles[reason] += 1;
    return { kind: 'single', instance, reason, cachedPromptTokens: ctx.cachedFor(instance) };
  }

  private plans(instance: SchedulableInstance): ReadonlySet<DispatchPlan> {
    const caps = instance.dispatch_capabilities;
    if (!Array.isArray(caps)) return dispatchPlansFromCapabilities(caps);
    let plans = this.planCache.get(caps);
    if (!plans) {
      plans = caps.length === 0 ? EMPTY_PLANS : dispatchPlansFromCapabilities(caps);
      this.planCache.set(caps, plans);
    }
    return plans;
  }

  private planUnion(instances: readonly SchedulableInstance[]): Set<DispatchPlan> {
    const union = new Set<DispatchPlan>();
    for (const instance of instances) for (const plan of this.plans(instance)) union.add(plan);
    return union;
  }

  private sharesAny(instance: SchedulableInstance, plans: ReadonlySet<DispatchPlan>): boolean {
    for (const plan of this.plans(instance)) if (plans.has(plan)) return true;
    return false;
  }
}

/** A failure as data (counting it is the caller's business: {@link Scheduler.selectPair} does, explain does not). */
function failureOf(
  code: SchedulingFailure['code'],
  message: string,
  missingCapabilities: readonly DispatchPlan[] = [],
  filtered: Record<string, number> = {},
): SchedulingFailure {
  return { kind: 'failure', code, message, missingCapabilities, filtered };
}

function incompatible(
  prefillPlans: ReadonlySet<DispatchPlan>,
  decodePlans: ReadonlySet<DispatchPlan>,
  dropped: Record<string, number>,
): SchedulingFailure {
  const missingOnDecode = [...prefillPlans].filter((p) => !decodePlans.has(p)).sort();
  const missingOnPrefill = [...decodePlans].filter((p) => !prefillPlans.has(p)).sort();
  const parts: string[] = [];
  if (prefillPlans.size === 0) parts.push('prefill instances advertise no dispatch plan');
  if (decodePlans.size === 0) parts.push('decode instances advertise no dispatch plan');
  if (missingOnDecode.length > 0) parts.push(`no decode instance supports ${missingOnDecode.join(' or ')}`);
  if (missingOnPrefill.length > 0)
    parts.push(`no prefill instance supports ${missingOnPrefill.join(' or ')}`);
  const message =
    `no compatible prefill/decode pair: ${parts.join('; ')} ` +
    `(prefill offers ${planList(prefillPlans)}; decode offers ${planList(decodePlans)})`;
  return failureOf(
    'no_compatible_pair',
    message,
    [...new Set([...missingOnDecode, ...missingOnPrefill])].sort(),
    dropped,
  );
}

function unavailable(
  dropped: Record<string, number>,
  why: string,
  code: SchedulingFailure['code'] = 'no_available_instance',
): SchedulingFailure {
  const reasons = Object.entries(dropped)
    .map(([type, n]) => `${n} removed by ${type}`)
    .join(', ');
  return failureOf(code, reasons ? `${why} (${reasons})` : why, [], dropped);
}
