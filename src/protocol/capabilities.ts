import { isDispatchPlan, type DispatchPlan } from './enums.js';
import { pyStr } from './python-values.js';

/** Anything that advertises dispatch capabilities (an instance as registered on the wire). */
export interface DispatchCapable {
  dispatch_capabilities?: unknown;
}

/**
 * Normalise advertised capability values into plans: non-plan strings are ignored, a bare string is
 * a one-element list, `null`/non-iterables give no plans.
 */
export function dispatchPlansFromCapabilities(values: unknown): Set<DispatchPlan> {
  const plans = new Set<DispatchPlan>();
  if (values === null || values === undefined) return plans;
  const iterable: Iterable<unknown> | null =
    typeof values === 'string'
      ? [values]
      : values instanceof Uint8Array
        ? [] // Python bytes: str(b'...') never names a plan
        : typeof values === 'object' && Symbol.iterator in values
          ? (values as Iterable<unknown>)
          : null;
  if (iterable === null) return plans;
  for (const value of iterable) {
    const text = pyStr(value);
    if (isDispatchPlan(text)) plans.add(text);
  }
  return plans;
}

/** Plans advertised by both instances. */
export function sharedDispatchPlans(prefill: DispatchCapable, decode: DispatchCapable): Set<DispatchPlan> {
  const decodePlans = dispatchPlansFromCapabilities(decode.dispatch_capabilities);
  const shared = new Set<DispatchPlan>();
  for (const plan of dispatchPlansFromCapabilities(prefill.dispatch_capabilities)) {
    if (decodePlans.has(plan)) shared.add(plan);
  }
  return shared;
}

/** Union of plans across instances; parses each instance once. */
export function dispatchPlanUnion(instances: Iterable<DispatchCapable>): Set<DispatchPlan> {
  const union = new Set<DispatchPlan>();
  for (const instance of instances) {
    for (const plan of dispatchPlansFromCapabilities(instance.dispatch_capabilities)) union.add(plan);
  }
  return union;
}

/**
 * Whether some P/D pair shares a plan. A shared plan exists iff the two plan unions intersect, so
 * this is O(P+D) without enumerating pairs.
 */
export function hasCompatibleDispatchPair(
  prefillInstances: Iterable<DispatchCapable>,
  decodeInstances: Iterable<DispatchCapable>,
): boolean {
  const prefillPlans = dispatchPlanUnion(prefillInstances);
  if (prefillPlans.size === 0) return false;
  for (const plan of dispatchPlanUnion(decodeInstances)) if (prefillPlans.has(plan)) return true;
  return false;
}
