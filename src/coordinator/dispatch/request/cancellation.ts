import type { DispatchStopReason } from '../../../protocol/index.js';
import type { MotorError } from '../../../common/motor-error.js';

/** Told once, with why and what stop reason the engines get. */
export type CancelListener = (reason: MotorError, stopReason: DispatchStopReason) => void;

/**
 * "This work is cancelled", said in one place with one reason. A client request has one
 * ({@link RequestCancellation}); each attempt has a child: cancelling the request cancels the
 * current attempt, while an attempt can fail alone (and be retried).
 */
export class Cancellation {
  /** Why it was cancelled; null while it runs. */
  reason: MotorError | null = null;
  /** What the engines are told when they are stopped for it. */
  stopReason: DispatchStopReason = 'other';
  /** Listeners and children (a child is cancelled in its turn, without a closure per child). */
  private listeners: Array<CancelListener | Cancellation> = [];
  private parent: Cancellation | null = null;

  get cancelled(): boolean {
    return this.reason !== null;
  }

  /** Cancels once (later calls are no-ops) and tells the listeners in the order they came. */
  cancel(reason: MotorError, stopReason: DispatchStopReason): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.stopReason = stopReason;
    this.release();
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) {
      if (listener instanceof Cancellation) listener.cancel(reason, stopReason);
      else listener(reason, stopReason);
    }
  }

  /** Calls `listener` on cancellation (at once when already cancelled). */
  onCancel(listener: CancelListener): void {
    if (this.reason !== null) listener(this.reason, this.stopReason);
    else this.listeners.push(listener);
  }

  off(listener: CancelListener | Cancellation): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  /** A cancellation ended by this one (with its reason) or on its own; {@link release} it when done. */
  child(): Cancellation {
    const child = new Cancellation();
    if (this.reason !== null) {
      child.cancel(this.reason, this.stopReason);
    } else {
      child.parent = this;
      this.listeners.push(child);
    }
    return child;
  }

  /** The work is over: a later cancellation of the parent no longer reaches this one. */
  release(): void {
    this.parent?.off(this);
    this.parent = null;
  }
}
