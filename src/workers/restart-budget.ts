/**
 * How many crashed workers the primary replaces: at most `max` restarts in any `windowMs`. A worker
 * that keeps dying (a bug hit by every request, memory exhausted at start) would otherwise be
 * re-forked in a tight loop; past the budget the primary stops the cluster and exits 1.
 */
export class RestartBudget {
  private readonly restarts: number[] = [];

  constructor(
    readonly max: number,
    readonly windowMs: number,
  ) {}

  /** Takes one restart at `now` (ms) if the budget allows it. */
  take(now: number): boolean {
    while (this.restarts.length > 0 && this.restarts[0]! <= now - this.windowMs) this.restarts.shift();
    if (this.restarts.length >= this.max) return false;
    this.restarts.push(now);
    return true;
  }
}
