import type { Registry, RegistryEvent } from './registry.js';

/**
 * Resolves with the first registry event matching `predicate` from now on, or rejects after
 * `timeoutMs` naming what was awaited. Useful wherever code must wait for the fleet to change
 * (an instance to appear on another replica, a drain to finish) without polling.
 */
export function waitForEvent(
  registry: Registry,
  predicate: (event: RegistryEvent) => boolean,
  timeoutMs: number,
  what = 'registry event',
): Promise<RegistryEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unwatch();
      reject(new Error(`no ${what} within ${timeoutMs} ms`));
    }, timeoutMs);
    const unwatch = registry.watch((event) => {
      if (!predicate(event)) return;
      clearTimeout(timer);
      unwatch();
      resolve(event);
    });
  });
}
