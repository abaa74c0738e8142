import type { DispatchPlan } from '../protocol/index.js';
import type { Instance } from './instance-source.js';

export type PdFlow = 'handoff' | 'trigger' | 'bootstrap';

/** Where one attempt runs, as the scheduler chose it (scheduling-adapter.ts). */
export type Route =
  | { kind: 'pd'; plan: DispatchPlan; flow: PdFlow; prefill: Instance; decode: Instance }
  | { kind: 'single'; instance: Instance; degraded: boolean };

export type PdRoute = Extract<Route, { kind: 'pd' }>;

export function servesModel(instance: Instance, model: string): boolean {
  return instance.models.length === 0 || instance.models.includes(model);
}

/** The concrete flow of a plan on a pair: concurrent sync is bootstrap on SGLang, trigger on vLLM. */
export function flowFor(plan: DispatchPlan, prefill: Instance): PdFlow {
  if (plan === 'prefill_handoff_decode') return 'handoff';
  return prefill.profile === 'bootstrap' || prefill.engine === 'sglang' ? 'bootstrap' : 'trigger';
}
