import type { ResolvedInstance } from '../config/coordinator-config.js';

/** One routable instance plus the live counters the coordinator keeps for it. */
export interface Instance extends ResolvedInstance {
  /** Requests (legs) currently open against this instance. */
  inFlight: number;
}

/**
 * Where the fleet comes from. The static list is the only source today; the registry (dynamic
 * registration, health, drain) will implement the same interface.
 */
export interface InstanceSource {
  /** The instances that may receive new work now. */
  routable(): readonly Instance[];
  /** Every known instance (for `/v1/models`). */
  all(): readonly Instance[];
}

export class StaticInstanceSource implements InstanceSource {
  private readonly instances: Instance[];

  constructor(configured: readonly ResolvedInstance[]) {
    this.instances = configured.map((c) => ({ ...c, inFlight: 0 }));
  }

  routable(): readonly Instance[] {
    return this.instances;
  }

  all(): readonly Instance[] {
    return this.instances;
  }
}
