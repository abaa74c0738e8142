import type { DispatchPlan } from '../../protocol/index.js';
import type { Instance } from '../fleet/instance-source.js';

export type PdFlow = 'handoff' | 'trigger' | 'bootstrap';

/** Where one attempt runs, as the scheduler chose it (scheduling-adapter.ts). */
export type Route =
  | { kind: 'pd'; plan: DispatchPlan; flow: PdFlow; prefill: Instance; decode: Instance }
  | { kind: 'single'; instance: Instance; degraded: boolean };

export type PdRoute = Extract<Route, { kind: 'pd' }>;

/**
 * The models an instance serves: its configured `models`, else what its engine listed at discovery;
 * empty = any model (nothing known). One rule for routing, `/ready` and `/v1/models`.
 */
export function servedModels(instance: Instance): readonly string[] {
  return instance.models.length > 0 ? instance.models : (instance.reportedModels ?? []);
}

export function servesModel(instance: Instance, model: string): boolean {
  const models = servedModels(instance);
  return models.length === 0 || models.includes(model);
}

/** The concrete flow of a plan on a pair: concurrent sync is bootstrap on SGLang, trigger on vLLM. */
export function flowFor(plan: DispatchPlan, prefill: Instance): PdFlow {
  if (plan === 'prefill_handoff_decode') return 'handoff';
  return prefill.profile === 'bootstrap' || prefill.engine === 'sglang' ? 'bootstrap' : 'trigger';
}
