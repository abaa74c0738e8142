import { dispatchPlanUnion, type DispatchPlan } from '../protocol/index.js';
import type { Instance } from './instance-source.js';
import { MotorError } from './motor-error.js';

/** Picks one instance among compatible candidates (only the `/ready` topology check uses this module's routing now). */
interface Scheduler {
  pick(candidates: readonly Instance[], role: 'prefill' | 'decode' | 'single'): Instance;
}

export type PdFlow = 'handoff' | 'trigger' | 'bootstrap';

export type Route =
  | { kind: 'pd'; plan: DispatchPlan; flow: PdFlow; prefill: Instance; decode: Instance }
  | { kind: 'single'; instance: Instance; degraded: boolean };

/** The scheduler's own fallback rules (`scheduling.fallback`, resolved), so `/ready` agrees with it. */
export interface RouteOptions {
  /** No P/D pair → single-instance dispatch on a union instance. */
  unionFallback: boolean;
  /** No decode instance → degraded single-instance dispatch on a prefill instance. */
  degradedPrefill: boolean;
  planPreference: readonly DispatchPlan[];
}

export function servesModel(instance: Instance, model: string): boolean {
  return instance.models.length === 0 || instance.models.includes(model);
}

/** The concrete flow of a plan on a pair: concurrent sync is bootstrap on SGLang, trigger on vLLM. */
export function flowFor(plan: DispatchPlan, prefill: Instance): PdFlow {
  if (plan === 'prefill_handoff_decode') return 'handoff';
  return prefill.profile === 'bootstrap' || prefill.engine === 'sglang' ? 'bootstrap' : 'trigger';
}

const list = (plans: Iterable<string>): string => {
  const a = [...plans].sort();
  return a.length > 0 ? a.join(', ') : 'none';
};

/**
 * Static route check of a (sub)fleet for `/ready` (conformance 12–16 shape): a P/D pair sharing a plan,
 * else a union instance, else (when `fallbackToSingle`) degraded single; throws a 503 naming the
 * missing capability. Request routing itself is the scheduling library's (`scheduling-adapter.ts`).
 */
function routeAmong(
  serving: readonly Instance[],
  model: string,
  scheduler: Scheduler,
  opts: RouteOptions,
): Route {
  const prefills: Instance[] = [];
  const decodes: Instance[] = [];
  const unions: Instance[] = [];
  for (const i of serving) (i.role === 'prefill' ? prefills : i.role === 'decode' ? decodes : unions).push(i);

  if (prefills.length > 0 && decodes.length > 0) {
    const prefillPlans = dispatchPlanUnion(prefills.map(capable));
    const decodeCands = decodes.filter((d) => intersects(d, prefillPlans));
    if (decodeCands.length > 0) {
      const decode = scheduler.pick(decodeCands, 'decode');
      const decodePlans = new Set(decode.dispatchCapabilities);
      const prefill = scheduler.pick(
        prefills.filter((p) => p.dispatchCapabilities.some((plan) => decodePlans.has(plan))),
        'prefill',
      );
      const shared = prefill.dispatchCapabilities.filter((plan) => decodePlans.has(plan));
      const plan = opts.planPreference.find((p) => shared.includes(p)) ?? shared[0]!;
      return { kind: 'pd', plan, flow: flowFor(plan, prefill), prefill, decode };
    }
  }
  if (unions.length > 0 && ((prefills.length === 0 && decodes.length === 0) || opts.unionFallback)) {
    return { kind: 'single', instance: scheduler.pick(unions, 'single'), degraded: false };
  }
  // like the scheduler: degraded single on a prefill instance only (a decode-only fleet has no route)
  if (opts.degradedPrefill && prefills.length > 0 && decodes.length === 0) {
    return { kind: 'single', instance: scheduler.pick(prefills, 'single'), degraded: true };
  }
  throw noRouteError(model, prefills, decodes, unions, opts);
}

function capable(i: Instance): { dispatch_capabilities: unknown } {
  return { dispatch_capabilities: i.dispatchCapabilities };
}

function intersects(i: Instance, plans: ReadonlySet<DispatchPlan>): boolean {
  return i.dispatchCapabilities.some((p) => plans.has(p));
}

function noRouteError(
  model: string,
  prefills: Instance[],
  decodes: Instance[],
  unions: Instance[],
  opts: RouteOptions,
): MotorError {
  const hint =
    opts.unionFallback && opts.degradedPrefill
      ? ''
      : '; set dispatch.fallbackToSingle (or scheduling.fallback) to serve it on one instance';
  let message: string;
  if (prefills.length > 0 && decodes.length > 0) {
    const p = dispatchPlanUnion(prefills.map(capable));
    const d = dispatchPlanUnion(decodes.map(capable));
    let missing: string;
    if (p.size === 0) missing = `prefill instances advertise no dispatch capability (unknown profile)`;
    else if (d.size === 0) missing = `decode instances advertise no dispatch capability (unknown profile)`;
    else missing = `decode instances lack ${list(p)} and prefill instances lack ${list(d)}`;
    message =
      `no prefill/decode pair for model '${model}' shares a dispatch plan: missing capability: ${missing} ` +
      `(prefill: ${list(p)}; decode: ${list(d)})${unions.length > 0 ? hint : ''}`;
  } else if (prefills.length > 0) {
    message = `no decode instance for model '${model}': missing capability: decode role (prefill-only fleet)${hint}`;
  } else if (decodes.length > 0) {
    message = `no prefill instance for model '${model}': missing capability: prefill role (decode-only fleet)${hint}`;
  } else {
    message = `no instance available for model '${model}'`;
  }
  return new MotorError('no_route', message);
}

/** Side-effect-free scheduler for topology checks (`/ready`). */
const firstPick: Scheduler = { pick: (c) => c[0]! };

/** Models that are (not) routable now; `*` stands for instances that serve any model. */
export function topologyReport(
  instances: readonly Instance[],
  opts: RouteOptions,
): { ready: boolean; models: Record<string, string> } {
  const names = new Set<string>();
  for (const i of instances) for (const m of i.models) names.add(m);
  if (instances.some((i) => i.models.length === 0)) names.add('*');
  const models: Record<string, string> = {};
  let ready = names.size > 0;
  for (const name of names) {
    try {
      const route = routeAmong(
        instances.filter((i) => (name === '*' ? i.models.length === 0 : servesModel(i, name))),
        name,
        firstPick,
        opts,
      );
      models[name] = route.kind === 'pd' ? route.plan : route.degraded ? 'single (degraded)' : 'single';
    } catch (err) {
      ready = false;
      models[name] = (err as Error).message;
    }
  }
  return { ready, models };
}
