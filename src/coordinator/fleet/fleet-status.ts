import type { InstanceRole } from '../../scheduling/index.js';
import type { Instance } from './instance-source.js';

const ROLES: readonly InstanceRole[] = ['prefill', 'decode', 'union'];

/** What a no-route message needs to know about the instances serving one model. */
export interface FleetFacts {
  /** Every registered instance serving the model (routable or not). */
  readonly registered: readonly Instance[];
  /** Ids of the instances the source offers to the scheduler now. */
  readonly routable: ReadonlySet<string>;
  /** Why a registered instance is not routable (`paused`, `unhealthy`, …). */
  readonly whyNotRoutable: (instance: Instance) => string;
  /** Whether the scheduler's circuit breaker holds a routable instance out. */
  readonly circuitOpen: (id: string) => boolean;
}

/** The truth about a model's fleet in words, and how many registered instances are held out. */
export interface FleetStatus {
  readonly text: string;
  readonly registered: number;
  readonly heldOut: number;
}

/**
 * Per role, how many instances are registered, how many can take work and why the others cannot —
 * `2 decode instances registered, none routable: 1 circuit open, 1 paused` — so a no-route error
 * never says "no instance is registered" of a fleet that has instances (issue 15 finding 10).
 */
export function fleetStatus(facts: FleetFacts): FleetStatus {
  const parts: string[] = [];
  let heldOut = 0;
  for (const role of ROLES) {
    const ofRole = facts.registered.filter((i) => i.role === role);
    if (ofRole.length === 0) continue;
    const reasons = new Map<string, number>();
    for (const instance of ofRole) {
      const why = !facts.routable.has(instance.id)
        ? facts.whyNotRoutable(instance)
        : facts.circuitOpen(instance.id)
          ? 'circuit open'
          : null;
      if (why !== null) reasons.set(why, (reasons.get(why) ?? 0) + 1);
    }
    const held = [...reasons.values()].reduce((a, b) => a + b, 0);
    heldOut += held;
    const usable = ofRole.length - held;
    const noun = `${ofRole.length} ${role} instance${ofRole.length === 1 ? '' : 's'} registered`;
    const state = held === 0 ? 'all routable' : usable === 0 ? 'none routable' : `${usable} routable`;
    const why = [...reasons].map(([reason, n]) => `${n} ${reason}`).join(', ');
    parts.push(why ? `${noun}, ${state}: ${why}` : `${noun}, ${state}`);
  }
  const text = parts.length > 0 ? parts.join('; ') : 'no instance is registered';
  return { text, registered: facts.registered.length, heldOut };
}
