import type { SchedulableInstance } from './types.js';

/** Whether two instances may form a pair: the same engine kind, or one of them names none. */
export function sameEngine(a: SchedulableInstance, b: SchedulableInstance): boolean {
  return a.engine === undefined || b.engine === undefined || a.engine === b.engine;
}

/** Whether a prefill has some decode of its engine kind among `decodeEngines`. */
export function pairsWithAny(
  prefill: SchedulableInstance,
  decodeEngines: ReadonlySet<string | undefined>,
): boolean {
  return prefill.engine === undefined || decodeEngines.has(undefined) || decodeEngines.has(prefill.engine);
}
