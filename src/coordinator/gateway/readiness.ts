import type { DispatchPlan } from '../../protocol/index.js';
import { Scheduler, type FleetSummary, type RouteExplanation } from '../../scheduling/index.js';
import type { Logger } from '../../common/logger.js';
import { fleetStatus } from '../fleet/fleet-status.js';
import type { Instance, InstanceSource } from '../fleet/instance-source.js';
import { servedModels, servesModel } from '../scheduling-bridge/route.js';
import { routeExplainer, type RouteExplainer } from '../scheduling-bridge/scheduling-adapter.js';

/** Fallback rules alone (the scheduler's `fallback` and `planPreference`), for {@link topologyReport}. */
export interface RouteOptions {
  /** No P/D pair → single-instance dispatch on a union instance. */
  unionFallback: boolean;
  /** No decode instance → degraded single-instance dispatch on a prefill instance. */
  degradedPrefill: boolean;
  planPreference: readonly DispatchPlan[];
}

export interface ReadinessReport {
  ready: boolean;
  /** Per model (`*`: instances that serve any model): the route it gets, or why it has none. */
  models: Record<string, string>;
  /** Per instance: why it is not scheduled or disagrees with its config (discovery); absent when none. */
  instances?: Record<string, string>;
  /** When not ready: the root cause in one sentence (what is missing, not "retry"). */
  reason?: string;
  /**
   * Per P/D pair (`<prefill> → <decode>`) served but degraded, with the likely cause (decodes that
   * recompute instead of loading the KV); absent when none. Never makes the coordinator unready.
   */
  degraded?: Record<string, string>;
}

/**
 * `/ready`: every model some instance serves must have a route, as the scheduler itself explains it
 * (conformance 12–16: a P/D pair sharing a plan, else a union instance, else degraded single).
 */
export function readinessReport(
  instances: readonly Instance[],
  scheduler: RouteExplainer,
  problems: Readonly<Record<string, string>> = {},
  degraded: Readonly<Record<string, string>> = {},
): ReadinessReport {
  const names = new Set<string>();
  for (const i of instances) for (const m of servedModels(i)) names.add(m);
  if (instances.some((i) => servedModels(i).length === 0)) names.add('*');
  const models: Record<string, string> = {};
  let ready = names.size > 0;
  for (const name of names) {
    const serving = instances.filter((i) =>
      name === '*' ? servedModels(i).length === 0 : servesModel(i, name),
    );
    const explained = scheduler.explain(serving, name);
    if (explained.kind === 'failure') ready = false;
    models[name] = describe(explained, name, scheduler.fallback);
  }
  const report: ReadinessReport = { ready, models };
  if (Object.keys(problems).length > 0) report.instances = { ...problems };
  if (Object.keys(degraded).length > 0) report.degraded = { ...degraded };
  return report;
}

/**
 * Why the fleet is not ready, most basic cause first: nothing registered, nothing routable (and why
 * each instance is held out: unhealthy, paused, circuit open), else the first model without a route.
 */
export function notReadyReason(
  report: ReadinessReport,
  source: Pick<InstanceSource, 'all' | 'routable' | 'unroutableReason'>,
  circuitOpen: (id: string) => boolean = () => false,
): string | undefined {
  if (report.ready) return undefined;
  const registered = source.all();
  if (registered.length === 0)
    return 'no instance is registered: add instances to the config, or start engine proxies that register (management.port or etcd)';
  const routable = new Set(source.routable().map((i) => i.id));
  const status = fleetStatus({
    registered,
    routable,
    whyNotRoutable: (i) => source.unroutableReason?.(i) ?? 'not routable',
    circuitOpen,
  });
  if (status.heldOut === registered.length) return `no instance can take work: ${status.text}`;
  const failing = Object.entries(report.models).find(([, route]) => route.startsWith('no '));
  return failing !== undefined ? failing[1] : status.text;
}

/**
 * One warn line when the not-ready cause changes (not one per probe: a Kubernetes readiness probe
 * polls every few seconds), and one info line when the fleet is ready again.
 */
export class ReadinessCauseLog {
  private last: string | undefined;

  constructor(private readonly log: Pick<Logger, 'warn' | 'info'>) {}

  note(reason: string | undefined): void {
    if (reason === this.last) return;
    if (reason !== undefined) this.log.warn({ reason }, 'not ready');
    else this.log.info('ready');
    this.last = reason;
  }
}

/** The same report for a fleet and fallback rules alone (no running coordinator). */
export function topologyReport(instances: readonly Instance[], rules: RouteOptions): ReadinessReport {
  const scheduler = new Scheduler({
    fallback: { union: rules.unionFallback, degradedPrefill: rules.degradedPrefill },
    planPreference: [...rules.planPreference],
  });
  return readinessReport(instances, routeExplainer(scheduler));
}

function describe(explained: RouteExplanation, model: string, fallback: RouteExplainer['fallback']): string {
  if (explained.kind === 'pair') return explained.plan;
  if (explained.kind === 'single')
    return explained.reason === 'degraded_prefill' ? 'single (degraded)' : 'single';
  return noRouteMessage(model, explained.fleet, fallback);
}

const list = (plans: readonly string[]): string => (plans.length > 0 ? plans.join(', ') : 'none');

/** The fix is on the instance: a direct one names its connector or profile, a proxy its --engine-config. */
const UNKNOWN_PROFILE =
  "unknown profile: set the instance's kvTransferConfig or dispatchProfile, or the proxy's --engine-config";

/** Names the missing capability (conformance 14) and, when it would help, the fallback setting. */
function noRouteMessage(model: string, fleet: FleetSummary, fallback: RouteExplainer['fallback']): string {
  const hint =
    fallback.union && fallback.degradedPrefill
      ? ''
      : '; set dispatch.fallbackToSingle (or scheduling.fallback) to serve it on one instance';
  if (fleet.prefill > 0 && fleet.decode > 0) {
    const p = fleet.prefillPlans;
    const d = fleet.decodePlans;
    let missing: string;
    if (p.length === 0) missing = `prefill instances advertise no dispatch capability (${UNKNOWN_PROFILE})`;
    else if (d.length === 0)
      missing = `decode instances advertise no dispatch capability (${UNKNOWN_PROFILE})`;
    else missing = `decode instances lack ${list(p)} and prefill instances lack ${list(d)}`;
    return (
      `no prefill/decode pair for model '${model}' shares a dispatch plan: missing capability: ${missing} ` +
      `(prefill: ${list(p)}; decode: ${list(d)})${fleet.union > 0 ? hint : ''}`
    );
  }
  if (fleet.prefill > 0)
    return `no decode instance for model '${model}': missing capability: decode role (prefill-only fleet)${hint}`;
  if (fleet.decode > 0)
    return `no prefill instance for model '${model}': missing capability: prefill role (decode-only fleet)${hint}`;
  return `no instance available for model '${model}'`;
}
