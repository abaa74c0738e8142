/** Outcome of one leg on one instance, as the dispatcher saw it. */
export type RequestOutcome =
  /** Completed normally. */
  | 'success'
  /** 5xx, 408, 429, connection error, timeout: counts against the circuit breaker. */
  | 'failure'
  /** Engine 4xx (the request's fault): does not count against the instance. */
  | 'client_error'
  /** Stopped by us (client disconnect, peer failed): neutral. */
  | 'cancelled';

/** In-flight work on one instance, as tracked by the coordinator itself. */
export interface InstanceLoad {
  /** Requests begun and not yet ended. */
  readonly inflightRequests: number;
  /** Prompt tokens of in-flight requests. */
  readonly inflightTokens: number;
  /** Uncached prompt tokens of in-flight requests that have not produced their first token (queued prefill work). */
  readonly pendingPrefillTokens: number;
}

export interface BeginOptions {
  readonly promptTokens: number;
  /** Prompt tokens expected to hit the instance's prefix cache (from the decision); default 0. */
  readonly cachedPromptTokens?: number;
}

/** Returned by {@link LoadTracker.begin}; both methods are idempotent. */
export interface LoadHandle {
  /** The instance produced its first token (or finished its prefill leg): its prefill work is done. */
  firstToken(): void;
  /** The request left the instance; `outcome` is informational here (feed it to the circuit breaker). */
  end(outcome?: RequestOutcome): void;
}

interface MutableLoad {
  inflightRequests: number;
  inflightTokens: number;
  pendingPrefillTokens: number;
}

/** Prompt tokens a leg must still compute itself: its prompt less what the decision expects cached. */
export function pendingPrefillTokens(options: BeginOptions): number {
  return Math.max(0, Math.max(0, options.promptTokens) - Math.max(0, options.cachedPromptTokens ?? 0));
}

const IDLE: InstanceLoad = Object.freeze({ inflightRequests: 0, inflightTokens: 0, pendingPrefillTokens: 0 });

/**
 * Per-instance in-flight requests and tokens, updated by the dispatcher around every leg. Entries are
 * dropped when an instance becomes idle, so the map never outgrows the set of busy instances.
 */
export class LoadTracker {
  private readonly loads = new Map<string, MutableLoad>();

  /** Current load of an instance (an idle instance reads as zeros). O(1). */
  get(instanceId: string): InstanceLoad {
    return this.loads.get(instanceId) ?? IDLE;
  }

  /** Snapshot of every busy instance (for metrics). */
  snapshot(): Map<string, InstanceLoad> {
    const out = new Map<string, InstanceLoad>();
    for (const [id, load] of this.loads) out.set(id, { ...load });
    return out;
  }

  begin(instanceId: string, options: BeginOptions): LoadHandle {
    const tokens = Math.max(0, options.promptTokens);
    const pending = pendingPrefillTokens(options);
    let load = this.loads.get(instanceId);
    if (!load) {
      load = { inflightRequests: 0, inflightTokens: 0, pendingPrefillTokens: 0 };
      this.loads.set(instanceId, load);
    }
    load.inflightRequests += 1;
    load.inflightTokens += tokens;
    load.pendingPrefillTokens += pending;
    let prefilling = true;
    let open = true;
    const entry = load;
    const finishPrefill = () => {
      if (!prefilling) return;
      prefilling = false;
      entry.pendingPrefillTokens -= pending;
    };
    return {
      firstToken: () => {
        if (open) finishPrefill();
      },
      end: () => {
        if (!open) return;
        finishPrefill();
        open = false;
        entry.inflightRequests -= 1;
        entry.inflightTokens -= tokens;
        if (entry.inflightRequests === 0 && this.loads.get(instanceId) === entry)
          this.loads.delete(instanceId);
      },
    };
  }
}
