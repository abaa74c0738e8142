import type { LoadHandle, LoadTracker } from '../../scheduling/index.js';

/**
 * The decode instance's load, counted from the moment its pair is chosen rather than from when its
 * leg opens (after the prefill): requests arriving together then see each other's decode picks and
 * spread (issue 17 item 6). The decode leg adopts the reservation ({@link take}), so it is counted
 * once; an attempt that ends without opening that leg {@link release}s it.
 */
export class LoadReservation {
  private handle: LoadHandle | null;

  constructor(
    tracker: LoadTracker,
    readonly instanceId: string,
    promptTokens: number,
  ) {
    // a decode leg does no prefill work (its KV arrives): all of its prompt counts as cached
    this.handle = tracker.begin(instanceId, { promptTokens, cachedPromptTokens: promptTokens });
  }

  /** The reserved load for the leg opening on `instanceId` (once; null for any other instance). */
  take(instanceId: string): LoadHandle | null {
    if (instanceId !== this.instanceId) return null;
    const handle = this.handle;
    this.handle = null;
    return handle;
  }

  /** Frees the load if no leg took it (idempotent). */
  release(): void {
    this.handle?.end('cancelled');
    this.handle = null;
  }
}
