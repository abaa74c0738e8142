import { systemClock, type Clock } from '../common/clock.js';
import type { DispatchStopRequest, DispatchStopState, MotorDispatch } from '../protocol/index.js';

/** `active → done | stopped`; a stop for an unknown attempt leaves a `stopped` tombstone. */
export type AttemptState = 'active' | 'done' | 'stopped';

export interface TrackerOptions {
  /** How long done/stopped entries and tombstones are remembered. */
  ttlMs: number;
  /** Most finished entries (done, stopped, tombstones) kept; the oldest go first. */
  maxFinished: number;
  /** Most attempts in flight at once; more are refused (503). */
  maxActive: number;
  clock?: Clock;
}

interface Entry {
  key: string;
  rootRequestId: string;
  attemptSeq: number;
  pairId: string;
  engineRequestId: string | null;
  state: AttemptState;
  reason: string | null;
  tombstone: boolean;
  finishedAt: number;
  aborters: Array<(reason: string) => unknown>;
}

/** One attempt in flight on this engine. */
export interface AttemptHandle {
  readonly rootRequestId: string;
  readonly attemptSeq: number;
  /** Set once a stop (or an expiry) ended the attempt; the reason is kept. */
  readonly stopReason: string | null;
  /** Registers what to run when the attempt is stopped (runs at once if it already was). */
  onAbort(fn: (reason: string) => unknown): void;
  /** Ends the attempt: `done` (the engine finished, or failed on its own) or `stopped`. No-op when ended. */
  finish(state: 'done' | 'stopped', reason?: string): void;
}

/** Why an attempt is refused; each is a code of the proxy's error table (proxy-error.ts). */
export type BeginRefusalCode =
  'attempt_in_flight' | 'attempt_finished' | 'dispatch_stopped' | 'too_many_attempts';

export type BeginResult =
  | { ok: true; handle: AttemptHandle }
  | { ok: false; status: number; code: BeginRefusalCode; message: string };

export interface StopOutcome {
  state: DispatchStopState;
  message: string;
  /** Settles when every abort action of a `stopped` attempt has (e.g. SGLang's /abort_request call). */
  aborted: Promise<void>;
}

const NOTHING = Promise.resolve();

const keyOf = (root: string, attempt: number): string => `${attempt}\u0000${root}`;

/**
 * The engine-side stop state machine of conformance 29, per `(root_request_id, attempt_seq)`.
 * Memory is bounded: in-flight attempts by `maxActive`; finished entries (insertion-ordered by
 * finish time, so expiry sweeps stop at the first live one) by `ttlMs` and `maxFinished`.
 */
export class AttemptTracker {
  private readonly active = new Map<string, Entry>();
  private readonly finished = new Map<string, Entry>();
  private readonly clock: Clock;

  constructor(private readonly opts: TrackerOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  get activeCount(): number {
    return this.active.size;
  }

  get finishedCount(): number {
    return this.finished.size;
  }

  /** Registers an attempt arriving on this engine, or refuses it (tombstone, duplicate, full). */
  begin(
    dispatch: Pick<MotorDispatch, 'root_request_id' | 'attempt_seq' | 'pair_id' | 'engine_request_id'>,
  ): BeginResult {
    this.sweep();
    const key = keyOf(dispatch.root_request_id, dispatch.attempt_seq);
    const what = `attempt ${dispatch.attempt_seq} of request ${dispatch.root_request_id}`;
    if (this.active.has(key)) {
      return {
        ok: false,
        status: 409,
        code: 'attempt_in_flight',
        message: `${what} is already in flight here`,
      };
    }
    const previous = this.finished.get(key);
    if (previous && this.sameAttempt(previous, dispatch.pair_id, dispatch.engine_request_id)) {
      const message = previous.tombstone
        ? `${what} was stopped (${previous.reason ?? 'other'}) before it arrived; refusing it`
        : previous.state === 'stopped'
          ? `${what} was already stopped (${previous.reason ?? 'other'})`
          : `${what} already ran to completion here`;
      return {
        ok: false,
        status: 409,
        code: previous.tombstone ? 'dispatch_stopped' : 'attempt_finished',
        message,
      };
    }
    if (previous) this.finished.delete(key); // another pair reused the attempt number: the old one is moot
    if (this.active.size >= this.opts.maxActive) {
      return {
        ok: false,
        status: 503,
        code: 'too_many_attempts',
        message: `too many attempts in flight on this engine proxy (${this.opts.maxActive})`,
      };
    }
    const entry: Entry = {
      key,
      rootRequestId: dispatch.root_request_id,
      attemptSeq: dispatch.attempt_seq,
      pairId: dispatch.pair_id,
      engineRequestId: dispatch.engine_request_id,
      state: 'active',
      reason: null,
      tombstone: false,
      finishedAt: 0,
      aborters: [],
    };
    this.active.set(key, entry);
    return { ok: true, handle: this.handleFor(entry) };
  }

  /** Applies a `/v1/dispatch/stop`; aborts the attempt when it is in flight. */
  stop(
    request: Pick<DispatchStopRequest, 'root_request_id' | 'attempt_seq' | 'pair_id' | 'engine_request_id'>,
    reason: string,
  ): StopOutcome {
    this.sweep();
    const key = keyOf(request.root_request_id, request.attempt_seq);
    const entry = this.active.get(key) ?? this.finished.get(key);
    if (!entry) {
      this.remember({
        key,
        rootRequestId: request.root_request_id,
        attemptSeq: request.attempt_seq,
        pairId: request.pair_id,
        engineRequestId: request.engine_request_id,
        state: 'stopped',
        reason,
        tombstone: true,
        finishedAt: 0,
        aborters: [],
      });
      return {
        state: 'not_found',
        message: 'no such attempt here; a tombstone refuses it if it arrives later',
        aborted: NOTHING,
      };
    }
    if (!this.sameAttempt(entry, request.pair_id, request.engine_request_id)) {
      return {
        state: 'stale',
        // Never the holder's ids: they are what a caller would need to stop the real attempt.
        message: 'the attempt here belongs to another pair or engine request',
        aborted: NOTHING,
      };
    }
    if (entry.state === 'done') {
      return { state: 'already_done', message: 'the attempt had already finished', aborted: NOTHING };
    }
    if (entry.state === 'stopped') {
      return {
        state: 'already_stopped',
        message: `already stopped (${entry.reason ?? 'other'})`,
        aborted: NOTHING,
      };
    }
    const aborted = this.end(entry, 'stopped', reason);
    return { state: 'stopped', message: 'the engine request was aborted', aborted };
  }

  /** State of one attempt, for tests and debugging. */
  stateOf(rootRequestId: string, attemptSeq: number): AttemptState | 'tombstone' | null {
    const entry =
      this.active.get(keyOf(rootRequestId, attemptSeq)) ??
      this.finished.get(keyOf(rootRequestId, attemptSeq));
    if (!entry) return null;
    return entry.tombstone ? 'tombstone' : entry.state;
  }

  /** Drops finished entries past their TTL; cheap (stops at the first live entry). */
  sweep(): void {
    const cutoff = this.clock.now() - this.opts.ttlMs;
    for (const entry of this.finished.values()) {
      if (entry.finishedAt > cutoff) break;
      this.finished.delete(entry.key);
    }
  }

  /** Aborts everything in flight (shutdown). */
  abortAll(reason: string): Promise<void> {
    const all = [...this.active.values()].map((entry) => this.end(entry, 'stopped', reason));
    return Promise.all(all).then(() => undefined);
  }

  private sameAttempt(entry: Entry, pairId: string, engineRequestId: string | null): boolean {
    if (entry.pairId !== pairId) return false;
    return (
      engineRequestId === null || entry.engineRequestId === null || entry.engineRequestId === engineRequestId
    );
  }

  private end(entry: Entry, state: 'done' | 'stopped', reason: string | null): Promise<void> {
    if (entry.state !== 'active') return NOTHING;
    entry.state = state;
    entry.reason = reason;
    this.active.delete(entry.key);
    this.remember(entry);
    const aborters = entry.aborters;
    entry.aborters = [];
    if (state !== 'stopped' || aborters.length === 0) return NOTHING;
    const results = aborters.map((fn) => {
      try {
        return Promise.resolve(fn(reason ?? 'other'));
      } catch (err) {
        return Promise.reject(err);
      }
    });
    return Promise.allSettled(results).then(() => undefined);
  }

  private remember(entry: Entry): void {
    entry.finishedAt = this.clock.now();
    this.finished.delete(entry.key);
    this.finished.set(entry.key, entry);
    while (this.finished.size > this.opts.maxFinished) {
      const oldest = this.finished.keys().next().value as string;
      this.finished.delete(oldest);
    }
  }

  private handleFor(entry: Entry): AttemptHandle {
    return {
      rootRequestId: entry.rootRequestId,
      attemptSeq: entry.attemptSeq,
      get stopReason() {
        return entry.state === 'stopped' ? (entry.reason ?? 'other') : null;
      },
      onAbort: (fn) => {
        if (entry.state === 'stopped') fn(entry.reason ?? 'other');
        else if (entry.state === 'active') entry.aborters.push(fn);
      },
      finish: (state, reason) => void this.end(entry, state, reason ?? null),
    };
  }
}
