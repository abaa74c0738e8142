import type { Instance } from './instance-source.js';

export type SchedulerPolicy = 'round-robin' | 'least-in-flight';

/**
 * Picks one instance among candidates that are already known to be compatible. Capability checks
 * live in route selection; the scheduling framework (filters → scorers → picker) will replace this
 * with plugins behind the same interface.
 */
export interface Scheduler {
  pick(candidates: readonly Instance[], role: 'prefill' | 'decode' | 'single'): Instance;
}

export class RoundRobinScheduler implements Scheduler {
  private readonly next = new Map<string, number>();

  pick(candidates: readonly Instance[], role: 'prefill' | 'decode' | 'single'): Instance {
    const n = this.next.get(role) ?? 0;
    this.next.set(role, (n + 1) % 1_000_000_007);
    return candidates[n % candidates.length]!;
  }
}

/** Fewest open legs; ties go round-robin so equal instances share the load. */
export class LeastInFlightScheduler implements Scheduler {
  private turn = 0;

  pick(candidates: readonly Instance[]): Instance {
    const start = this.turn++ % candidates.length;
    let best = candidates[start]!;
    for (let i = 1; i < candidates.length; i++) {
      const c = candidates[(start + i) % candidates.length]!;
      if (c.inFlight < best.inFlight) best = c;
    }
    return best;
  }
}

export function createScheduler(policy: SchedulerPolicy): Scheduler {
  return policy === 'round-robin' ? new RoundRobinScheduler() : new LeastInFlightScheduler();
}
