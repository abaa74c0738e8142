export type Outcome = 'completed' | 'aborted' | 'failed';
export type LedgerState = 'waiting_kv' | 'queued' | 'prefill' | 'decode' | 'transfer';

export interface LedgerEntry {
  id: string;
  route: string;
  /** plain | handoff_prefill | handoff_decode | trigger_prefill | trigger_decode | bootstrap_prefill | bootstrap_decode */
  flow: string;
  state: LedgerState;
  started_at_ms: number;
  output_tokens: number;
}

export interface FinishedEntry {
  id: string;
  route: string;
  flow: string;
  outcome: Outcome;
  reason: string | null;
  started_at_ms: number;
  ended_at_ms: number;
  output_tokens: number;
}

/**
 * What happened to every request: in-flight ones and a bounded ring of finished ones, so tests can
 * prove nothing was left running. `waitIdle` resolves when nothing is in flight (or on timeout).
 */
export class Ledger {
  private readonly inFlight = new Set<LedgerEntry>();
  private readonly finished: FinishedEntry[] = [];
  private next = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly max: number) {}

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  start(id: string, route: string, flow: string): LedgerEntry {
    const e: LedgerEntry = { id, route, flow, state: 'queued', started_at_ms: Date.now(), output_tokens: 0 };
    this.inFlight.add(e);
    return e;
  }

  finish(e: LedgerEntry, outcome: Outcome, reason: string | null): void {
    if (!this.inFlight.delete(e)) return;
    if (this.max > 0) {
      const f: FinishedEntry = {
        id: e.id,
        route: e.route,
        flow: e.flow,
        outcome,
        reason,
        started_at_ms: e.started_at_ms,
        ended_at_ms: Date.now(),
        output_tokens: e.output_tokens,
      };
      if (this.finished.length < this.max) this.finished.push(f);
      else this.finished[this.next] = f;
      this.next = (this.next + 1) % this.max;
    }
    if (this.inFlight.size === 0 && this.idleWaiters.length > 0) {
      const ws = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of ws) w();
    }
  }

  /** Entries (in flight) whose id matches, for /abort_request. */
  findInFlight(id: string): LedgerEntry[] {
    const out: LedgerEntry[] = [];
    for (const e of this.inFlight) if (e.id === id) out.push(e);
    return out;
  }

  waitIdle(timeoutMs: number): Promise<void> {
    if (this.inFlight.size === 0 || timeoutMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.idleWaiters.push(done);
    });
  }

  snapshot(): { in_flight: LedgerEntry[]; finished: FinishedEntry[] } {
    const finished =
      this.finished.length < this.max
        ? this.finished.slice()
        : [...this.finished.slice(this.next), ...this.finished.slice(0, this.next)];
    return { in_flight: [...this.inFlight].map((e) => ({ ...e })), finished };
  }

  clearFinished(): void {
    this.finished.length = 0;
    this.next = 0;
  }
}
