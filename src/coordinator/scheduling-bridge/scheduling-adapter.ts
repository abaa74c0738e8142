import type { Logger } from '../../common/logger.js';
import type { CoordinatorSchedulingConfig } from '../../config/scheduling-section.js';
import {
  AdmissionController,
  Scheduler,
  type AdmissionOptions,
  type InstanceRole,
  type LoadHandle,
  type RequestOutcome,
  type RouteExplanation,
  type SchedulableInstance,
  type SchedulerOptions,
  type SchedulingConfig,
  type SchedulingRequest,
} from '../../scheduling/index.js';
import { EngineMetricsScraper } from '../fleet/engine-metrics-scraper.js';
import type { Instance, InstanceSource } from '../fleet/instance-source.js';
import { MotorError } from '../../common/motor-error.js';
import { renderPrompt } from '../kv-routing/prompt-render.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import { cacheSaltOf } from '../internal-request/cache-salt.js';
import type { Upstreams } from '../fleet/upstream.js';
import { flowFor, servedModels, servesModel, type Route } from './route.js';
import { didYouMean } from '../../common/did-you-mean.js';
import { fleetStatus, type FleetStatus } from '../fleet/fleet-status.js';
import { LoadReservation } from './load-reservation.js';

/** The scheduler's view of a coordinator instance (live: reads the instance object on every access). */
class InstanceView implements SchedulableInstance {
  constructor(readonly instance: Instance) {}
  get id(): string {
    return this.instance.id;
  }
  get role(): InstanceRole {
    return this.instance.role;
  }
  get url(): string {
    return this.instance.url;
  }
  get dispatch_capabilities(): readonly string[] {
    return this.instance.dispatchCapabilities;
  }
  get weight(): number | undefined {
    return (this.instance as { weight?: number }).weight;
  }
  get engine(): string {
    return this.instance.engine;
  }
  get kvConnector(): string | undefined {
    return this.instance.kvConnector;
  }
}

/**
 * `/ready`'s question to the scheduler: the route `model` gets on `instances` by the scheduler's own
 * rules, every instance taken as available (readiness is the fleet's topology; a momentary open
 * circuit is not). Moves no scheduling state ({@link Scheduler.explain}).
 */
export interface RouteExplainer {
  explain(instances: readonly Instance[], model: string): RouteExplanation;
  /** The fallback rules the answers follow. */
  readonly fallback: SchedulingConfig['fallback'];
}

export function routeExplainer(
  scheduler: Scheduler,
  view: (instance: Instance) => SchedulableInstance = (instance) => new InstanceView(instance),
): RouteExplainer {
  return {
    fallback: scheduler.config.fallback,
    // an unbounded prompt: the short-prompt shortcut (conditional disaggregation) is per request
    explain: (instances, model) =>
      scheduler.explain({ model, promptTokens: Number.POSITIVE_INFINITY }, instances.map(view), {
        assumeAvailable: true,
      }),
  };
}

/** A route plus what the load tracker needs; `picked` are the instances the scheduler chose. */
export interface Selection {
  route: Route;
  cachedPromptTokens: number;
  /** A pair's decode instance's estimate, from a cache-aware decode scorer (decode-first reads it). */
  decodeCachedPromptTokens?: number;
  picked: readonly Instance[];
  /** A pair's decode load, counted from the pick: its leg takes it, the attempt's end releases it. */
  reservation: LoadReservation | null;
}

/** Per-leg bookkeeping: load tracking and the circuit-breaker outcome. */
export interface LegTracking {
  firstToken(): void;
  /** `err` is the leg's or the attempt's failure (null = success); classified into an outcome once. */
  end(err: MotorError | null | undefined): void;
}

/**
 * The outcome of a leg on its instance given the failure it ended with: 4xx is the request's fault,
 * a stop caused by another leg, the client or the overall deadline is neutral, and a timeout, 5xx,
 * 408/429 or connection error counts against the instance.
 */
export function legOutcome(instanceId: string, err: MotorError | null | undefined): RequestOutcome {
  if (!err) return 'success';
  if (
    err.stoppedByPeer ||
    err.code === 'client_disconnect' ||
    err.code === 'client_stalled' ||
    err.code === 'deadline_exceeded' ||
    err.code === 'upload_refused' || // most likely over the engine's body limit: charged to nobody
    err.code === 'instance_withdrawn' // drained/paused after the pick: no request reached it
  )
    return 'cancelled';
  // Watchdogs and mid-stream engine errors name no instance: they end the legs still open.
  if (err.instanceId === undefined)
    return err.code === 'first_token_timeout' || err.code === 'idle_timeout' || err.code === 'engine_error'
      ? 'failure'
      : 'cancelled';
  if (err.instanceId !== instanceId) return 'cancelled';
  return err.code === 'engine_rejected' ? 'client_error' : 'failure';
}

/**
 * The scheduling library wired into the coordinator: one {@link Scheduler} (pair selection, load
 * tracker, breakers, engine metrics), the {@link AdmissionController}, the engine-metrics scraper and
 * a sweep that forgets instances the source no longer knows.
 */
export class SchedulingAdapter {
  readonly scheduler: Scheduler;
  /** For `/ready` (side-effect free). */
  readonly explainer: RouteExplainer;
  readonly admission: AdmissionController;
  readonly scraper: EngineMetricsScraper | null;
  private readonly views = new WeakMap<Instance, InstanceView>();
  private readonly known = new Set<string>();
  private sweepTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly config: CoordinatorSchedulingConfig,
    private readonly deps: {
      source: InstanceSource;
      upstreams: Upstreams;
      log: Logger;
      /** Admission's request-body byte budget (`server.maxInflightBodyBytes` and its shares; default none). */
      bodyBudget?: Pick<
        AdmissionOptions,
        'maxInflightBodyBytes' | 'bodyReservationBytes' | 'maxClientBodyBytes'
      >;
      /** Load tracker and prefix indexes shared with the other replicas (`routingSync`); default local ones. */
      sharedState?: Pick<SchedulerOptions, 'loadTracker' | 'newPrefixIndex'>;
    },
  ) {
    const { log } = deps;
    this.scheduler = new Scheduler(config.library, {
      ...(config.plugins ? { plugins: config.plugins } : {}),
      ...deps.sharedState,
      onCircuitStateChange: (instance, from, to) => log.warn({ instance, from, to }, 'circuit state changed'),
      onMetricsFallback: (instance, why) =>
        log.warn({ instance, why }, 'engine metrics missing or stale; scoring without them'),
    });
    this.explainer = routeExplainer(this.scheduler, (instance) => this.view(instance));
    this.admission = new AdmissionController({
      ...this.scheduler.config.admission,
      ...deps.bodyBudget,
    });
    this.scraper = config.scrape.enabled
      ? new EngineMetricsScraper({
          source: deps.source,
          upstreams: deps.upstreams,
          store: this.scheduler.engineMetrics,
          intervalMs: config.scrape.intervalMs,
          timeoutMs: config.scrape.timeoutMs,
          log,
        })
      : null;
  }

  start(): void {
    this.scraper?.start();
    this.sweepTimer = setInterval(() => this.sweep(), 5_000);
    this.sweepTimer.unref();
  }

  close(): void {
    this.scraper?.stop();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    this.admission.close();
  }

  /** Drops per-instance scheduling state of instances the source no longer lists. */
  sweep(): void {
    const present = new Set(this.deps.source.all().map((i) => i.id));
    for (const id of this.known) {
      if (present.has(id)) continue;
      this.known.delete(id);
      this.scheduler.forgetInstance(id);
    }
    for (const id of present) this.known.add(id);
  }

  /** The scheduling request of one client request: the prompt is rendered here, once. */
  requestFor(client: ClientRequest, meta: { sessionKey?: string; apiKey?: string }): SchedulingRequest {
    const prompt = renderPrompt(client);
    return {
      model: client.model,
      promptText: prompt.text,
      promptTokenIds: prompt.tokenIds,
      promptTokens: prompt.tokens,
      sessionKey: meta.sessionKey,
      apiKey: meta.apiKey,
      cacheSalt: cacheSaltOf(client.body),
    };
  }

  /**
   * Chooses the route of one attempt among the routable instances serving the model, avoiding
   * `exclude` (instances that just failed) when another route exists. Throws a 404 for a model no
   * registered instance serves and a 503 (`no_route`) naming the missing capability, or how many
   * instances of each role are registered and why they are held out.
   */
  select(
    instances: readonly Instance[],
    request: SchedulingRequest,
    exclude: ReadonlySet<string>,
  ): Selection {
    const decision = this.decide(instances, request, exclude, (views) =>
      this.scheduler.selectPair(request, views),
    );
    if (decision.kind === 'failure') {
      const prefix = `no route for model '${request.model}'`;
      if (decision.code === 'no_compatible_pair')
        throw new MotorError('no_route', `${prefix}: missing capability: ${decision.message}`);
      // "no decode instance is registered" of a fleet whose decodes are only paused would mislead
      const status = this.statusOf(request.model);
      throw new MotorError('no_route', `${prefix}: ${status.heldOut > 0 ? status.text : decision.message}`);
    }
    if (decision.kind === 'pair') {
      const prefill = (decision.prefill as InstanceView).instance;
      const decode = (decision.decode as InstanceView).instance;
      return {
        route: { kind: 'pd', plan: decision.plan, flow: flowFor(decision.plan, prefill), prefill, decode },
        cachedPromptTokens: decision.cachedPromptTokens,
        decodeCachedPromptTokens: decision.decodeCachedPromptTokens,
        picked: [prefill, decode],
        reservation: new LoadReservation(this.scheduler.loadTracker, decode.id, request.promptTokens),
      };
    }
    const instance = (decision.instance as InstanceView).instance;
    return {
      route: { kind: 'single', instance, degraded: decision.reason === 'degraded_prefill' },
      cachedPromptTokens: decision.cachedPromptTokens,
      picked: [instance],
      reservation: null,
    };
  }

  /**
   * `pick`'s decision among the instances serving the model, avoiding `exclude` when another can
   * serve; a 404 for a model no registered instance serves.
   */
  private decide<D extends { kind: string }>(
    instances: readonly Instance[],
    request: SchedulingRequest,
    exclude: ReadonlySet<string>,
    pick: (serving: InstanceView[]) => D,
  ): D {
    const serving: InstanceView[] = [];
    for (const instance of instances)
      if (servesModel(instance, request.model)) serving.push(this.view(instance));
    if (serving.length === 0) throw this.nothingServes(request.model);
    const avoiding = exclude.size > 0 ? pick(serving.filter((v) => !exclude.has(v.id))) : undefined;
    // Only the failed instances can serve: try them again rather than failing the request.
    return avoiding !== undefined && avoiding.kind !== 'failure' ? avoiding : pick(serving);
  }

  /**
   * The one instance a request without generation runs on (embeddings, tokenize, score: no P/D
   * split), from the first of `roles` with an available instance serving the model, avoiding
   * `exclude` when another instance can serve. Throws as {@link select} does.
   */
  selectOne(
    instances: readonly Instance[],
    request: SchedulingRequest,
    exclude: ReadonlySet<string>,
    roles: readonly InstanceRole[],
  ): Selection {
    const decision = this.decide(instances, request, exclude, (views) =>
      this.scheduler.selectOne(request, views, roles),
    );
    if (decision.kind === 'failure')
      throw new MotorError('no_route', `no route for model '${request.model}': ${decision.message}`);
    const instance = (decision.instance as InstanceView).instance;
    return {
      route: { kind: 'single', instance, degraded: false },
      cachedPromptTokens: 0,
      picked: [instance],
      reservation: null,
    };
  }

  /**
   * Starts tracking one leg. The decode leg of a pair does no prefill work (its KV arrives), so it
   * counts its prompt as in-flight tokens but not as pending prefill; it adopts the load reserved for
   * it at the pick (`reservation`) instead of counting it again.
   */
  beginLeg(
    instance: Instance,
    role: 'prefill' | 'decode' | 'single',
    request: SchedulingRequest,
    cachedPromptTokens: number,
    reservation?: LoadReservation | null,
  ): LegTracking {
    const promptTokens = request.promptTokens;
    const handle: LoadHandle =
      (role === 'decode' ? reservation?.take(instance.id) : null) ??
      this.scheduler.loadTracker.begin(instance.id, {
        promptTokens,
        cachedPromptTokens: role === 'decode' ? promptTokens : cachedPromptTokens,
      });
    let ended = false;
    return {
      firstToken: () => handle.firstToken(),
      end: (err) => {
        if (ended) return;
        ended = true;
        const outcome = legOutcome(instance.id, err);
        handle.end(outcome);
        this.scheduler.breakers.record(instance.id, outcome);
      },
    };
  }

  /** An instance the scheduler picked got no leg (its attempt ended first): frees a half-open probe slot. */
  unused(instance: Instance): void {
    this.scheduler.breakers.record(instance.id, 'cancelled');
  }

  /**
   * No routable instance serves `model`: 404 only when the fleet has instances and none of them,
   * routable or not, serves it. Registered instances that are not routable yet (a restart: health not
   * probed) or an empty fleet (proxies not re-registered yet) are a retryable 503 saying so.
   */
  private nothingServes(model: string): MotorError {
    const status = this.statusOf(model);
    const fleet = this.deps.source.all();
    if (status.registered === 0 && fleet.length > 0) {
      // a missing organisation prefix (`Qwen3-0.6B` for `Qwen/Qwen3-0.6B`) is the usual mistake: the
      // served names, and the nearest, let the client fix it without a second request
      const served = [...new Set(fleet.flatMap((i) => servedModels(i)))].sort();
      return new MotorError(
        'model_not_found',
        `The model '${model}' does not exist or no instance serves it; served models: ${served.join(', ')}` +
          modelSuggestion(model, served),
        { param: 'model' },
      );
    }
    // the cause, not a promise: an empty fleet stays empty until something registers
    const text =
      fleet.length === 0
        ? 'no instance is registered (none in the config, and no engine proxy has registered)'
        : status.text;
    return new MotorError('no_route', `no route for model '${model}': ${text}`, { retryable: true });
  }

  /** The registered fleet serving `model`, in words (fleet-status.ts); only on the failure path. */
  private statusOf(model: string): FleetStatus {
    const { source } = this.deps;
    const routable = new Set(source.routable().map((i) => i.id));
    return fleetStatus({
      registered: source.all().filter((i) => servesModel(i, model)),
      routable,
      whyNotRoutable: (i) => source.unroutableReason?.(i) ?? 'not routable',
      circuitOpen: (id) => this.scheduler.breakers.state(id) === 'open',
    });
  }

  private view(instance: Instance): InstanceView {
    let view = this.views.get(instance);
    if (!view) {
      view = new InstanceView(instance);
      this.views.set(instance, view);
      this.known.add(instance.id);
    }
    return view;
  }
}

/** The served name that is `model` with its organisation prefix (`Qwen/` + `Qwen3-0.6B`), else the nearest. */
function modelSuggestion(model: string, served: readonly string[]): string {
  const wanted = `/${model.toLowerCase()}`;
  const match = served.find((name) => name.toLowerCase().endsWith(wanted));
  return match !== undefined ? `; did you mean '${match}'?` : didYouMean(model, served);
}
