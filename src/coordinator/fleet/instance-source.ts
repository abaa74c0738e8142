import type { ResolvedInstance } from '../../config/coordinator-config.js';

/** One routable instance plus the live counters the coordinator keeps for it. */
export interface Instance extends ResolvedInstance {
  /** Requests (legs) currently open against this instance. */
  inFlight: number;
  /** Models the engine itself lists (discovery); `/v1/models` shows them when `models` is empty. */
  reportedModels?: readonly string[];
}

/**
 * Where the fleet comes from: the static list (tests, embedding) or the registry
 * (`RegistryInstanceSource`: dynamic registration, health, drain).
 */
export interface InstanceSource {
  /** The instances that may receive new work now. */
  routable(): readonly Instance[];
  /** Every known instance (for `/v1/models`). */
  all(): readonly Instance[];
  /** Per instance id, why it is held out of scheduling or disagrees with its config (`/ready`). */
  problems?(): Readonly<Record<string, string>>;
  /** Why a known instance is not routable now (`paused`, `unhealthy`, …); absent = no reason known. */
  unroutableReason?(instance: Instance): string;
  /**
   * Claims the instance for one leg: the idempotent release callback, or `undefined` when it no
   * longer takes new work (drained or paused since it was picked). Absent = always granted.
   */
  acquire?(instance: Instance): (() => void) | undefined;
  /** Passive health signals from dispatch: the leg's engine answered / could not be reached. */
  reportSuccess?(instance: Instance): void;
  reportFailure?(instance: Instance, error: string): void;
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
