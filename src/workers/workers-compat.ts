import type { CoordinatorConfig } from '../config/coordinator-config.js';

/**
 * Why this config cannot run as `workers` processes (null: it can). A memory registry lives in each
 * process: a management API call (register, drain, pause) would reach one worker and the others would
 * never learn of it, so mutations need the registry every worker watches (`registry.store: etcd`).
 */
export function workersProblem(
  config: Pick<CoordinatorConfig, 'management' | 'registry'>,
  workers: number,
): string | null {
  if (workers <= 1) return null;
  if (config.management.port !== null && config.registry.store === 'memory')
    return (
      `--workers ${workers}: management.port needs registry.store: etcd (a memory registry is per process, ` +
      'so a registration would reach one worker only); unset management.port or use etcd'
    );
  return null;
}
