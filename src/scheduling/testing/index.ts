import type { DispatchPlan } from '../../protocol/index.js';
import type { InstanceRole, SchedulableInstance, SchedulingRequest } from '../types.js';

/** Test fixture: an instance with the given role and plans. */
export function instance(
  id: string,
  role: InstanceRole,
  plans: readonly (DispatchPlan | string)[] = ['prefill_handoff_decode'],
  weight?: number,
): SchedulableInstance {
  return {
    id,
    role,
    url: `http://${id}.test:8000`,
    dispatch_capabilities: plans,
    ...(weight ? { weight } : {}),
  };
}

/** Test fixture: `n` instances `${prefix}0..` of one role. */
export function fleet(
  prefix: string,
  role: InstanceRole,
  n: number,
  plans: readonly (DispatchPlan | string)[] = ['prefill_handoff_decode'],
): SchedulableInstance[] {
  return Array.from({ length: n }, (_, i) => instance(`${prefix}${i}`, role, plans));
}

/** Test fixture: a request for a rendered prompt. */
export function request(
  promptText = 'hello world',
  extra: Partial<SchedulingRequest> = {},
): SchedulingRequest {
  return { model: 'm', promptText, promptTokens: Math.ceil(promptText.length / 4), ...extra };
}
