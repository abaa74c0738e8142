import {
  LoadTracker,
  pendingPrefillTokens,
  type BeginOptions,
  type InstanceLoad,
  type LoadHandle,
} from '../../scheduling/index.js';
import type { RoutingOp } from './routing-messages.js';

interface MutableLoad {
  inflightRequests: number;
  inflightTokens: number;
  pendingPrefillTokens: number;
}

/** One of this replica's loads still open, as a state answer lists it. */
interface OwnLoad {
  readonly instance: string;
  readonly tokens: number;
  pending: number;
}

/**
 * The load tracker of a replica that shares routing state: every leg it begins, finishes prefilling
 * and ends is published ({@link RoutingOp} `l` / `p` / `u`), and an instance's load reads as this
 * replica's own plus what the other replicas reported (`adjustRemote`). Decode reservations go
 * through `begin` too, so replicas behind a random balancer see each other's decode picks and split
 * concurrent streams evenly.
 */
export class SharedLoadTracker extends LoadTracker {
  private readonly remote = new Map<string, MutableLoad>();
  /** This replica's open loads by id (what a state answer lists). */
  readonly own = new Map<string, OwnLoad>();
  private nextId = 0;

  constructor(private readonly publish: (op: RoutingOp) => void) {
    super();
  }

  override get(instanceId: string): InstanceLoad {
    const local = super.get(instanceId);
    const r = this.remote.get(instanceId);
    if (r === undefined) return local;
    return {
      inflightRequests: local.inflightRequests + r.inflightRequests,
      inflightTokens: local.inflightTokens + r.inflightTokens,
      pendingPrefillTokens: local.pendingPrefillTokens + r.pendingPrefillTokens,
    };
  }

  override snapshot(): Map<string, InstanceLoad> {
    const out = super.snapshot();
    for (const id of this.remote.keys()) out.set(id, this.get(id));
    return out;
  }

  override begin(instanceId: string, options: BeginOptions): LoadHandle {
    const handle = super.begin(instanceId, options);
    const id = (this.nextId++).toString(36);
    const own: OwnLoad = {
      instance: instanceId,
      tokens: Math.max(0, options.promptTokens),
      pending: pendingPrefillTokens(options),
    };
    this.own.set(id, own);
    this.publish(['l', id, instanceId, own.tokens, own.pending]);
    let prefilled = own.pending === 0;
    let ended = false;
    return {
      firstToken: () => {
        handle.firstToken();
        if (prefilled || ended) return;
        prefilled = true;
        own.pending = 0;
        this.publish(['p', id]);
      },
      end: (outcome) => {
        handle.end(outcome);
        if (ended) return;
        ended = true;
        this.own.delete(id);
        this.publish(['u', id]);
      },
    };
  }

  /** Adds (sign 1) or removes (sign -1) another replica's load on an instance. */
  adjustRemote(instance: string, sign: 1 | -1, requests: number, tokens: number, pending: number): void {
    let r = this.remote.get(instance);
    if (r === undefined) {
      if (sign < 0) return;
      this.remote.set(instance, (r = { inflightRequests: 0, inflightTokens: 0, pendingPrefillTokens: 0 }));
    }
    r.inflightRequests += sign * requests;
    r.inflightTokens += sign * tokens;
    r.pendingPrefillTokens += sign * pending;
    if (r.inflightRequests <= 0) this.remote.delete(instance);
  }
}
