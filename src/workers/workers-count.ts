import { availableParallelism } from 'node:os';

/** Most worker processes `--workers` accepts (a typo such as `--workers 200` is refused, not forked). */
export const MAX_WORKERS = 64;

/**
 * `--workers <n|auto>`: a whole number from 1 to {@link MAX_WORKERS}, or `auto` (the CPUs this process
 * may run on, `os.availableParallelism()`). Returns the count, or a one-line problem.
 */
export function parseWorkers(
  value: string,
  cpus: () => number = availableParallelism,
): { workers: number } | { problem: string } {
  const text = value.trim();
  if (text === 'auto') return { workers: Math.min(MAX_WORKERS, Math.max(1, cpus())) };
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= MAX_WORKERS))
    return { problem: `--workers ${value}: expected 'auto' or a whole number from 1 to ${MAX_WORKERS}` };
  return { workers: n };
}
