import type { Clock, TimerHandle } from '../common/clock.js';
import { systemClock } from '../common/clock.js';
import { TokenBucketLimiter } from './token-bucket-limiter.js';

export interface AdmissionOptions {
  /** Requests running at once through this coordinator. */
  readonly maxConcurrent: number;
  /** Requests waiting for a slot; beyond this they are rejected at once (default 0 = no queue). */
  readonly maxQueue?: number;
  /** A queued request is rejected after waiting this long (default 30 000 ms). */
  readonly queueTimeoutMs?: number;
  /** Retry-After suggested for overload rejections (default 1 s). */
  readonly retryAfterSeconds?: number;
  /**
   * Request-body bytes admitted at once (default `Infinity`): what has arrived of each body plus a
   * reservation for the rest (`bodyReservationBytes`), until the request ends; a request whose
   * reservation does not fit waits in the queue like one without a slot, and a body whose arrival
   * outgrows the budget is refused (`AdmissionTicket.grow`).
   */
  readonly maxInflightBodyBytes?: number;
  /**
   * Most of a declared body's not-yet-arrived bytes counted ahead of them (default `Infinity`: the
   * whole declared length at admission). Bounded, so a socket that declares a large body and sends
   * it slowly holds no more of the budget than it has sent plus this.
   */
  readonly bodyReservationBytes?: number;
  /**
   * Most body bytes one client (`AdmissionRequest.client`) may hold, queued reservations included
   * (default `Infinity`), so one client can never take the whole budget; beyond it → 429 at once.
   */
  readonly maxClientBodyBytes?: number;
  /** Optional per-API-key token bucket (requests per second). */
  readonly rateLimit?: { readonly ratePerSecond: number; readonly burst?: number; readonly maxKeys?: number };
  readonly clock?: Clock;
}

export type AdmissionRejectionReason =
  /** Per-key rate limit exceeded → 429. */
  | 'rate_limited'
  /** Concurrency limit reached and the queue is full → 503. */
  | 'queue_full'
  /** Waited `queueTimeoutMs` without a slot → 503. */
  | 'queue_timeout'
  /**
   * The request's body cannot fit the body budget: declared larger than all of it, or a body whose
   * arrival outgrew what is left (`AdmissionTicket.grow`) → 503.
   */
  | 'body_budget'
  /** The client already holds its share of the body budget (`maxClientBodyBytes`) → 429. */
  | 'client_body_share'
  /** The caller's signal aborted while queued (client gone; nothing to render). */
  | 'aborted'
  /** The controller was closed (shutdown) → 503. */
  | 'closed';

/** Typed rejection; the gateway renders `status` with `Retry-After: retryAfterSeconds`. */
export interface AdmissionRejection {
  readonly admitted: false;
  readonly reason: AdmissionRejectionReason;
  readonly status: 429 | 503;
  readonly retryAfterSeconds: number;
  readonly message: string;
}

export interface AdmissionRequest {
  /** Rate-limit key. */
  apiKey?: string;
  /**
   * Aborts a queued request; or a function making that signal, called only if the request has to
   * queue (most are admitted at once, and a signal per request is not free).
   */
  signal?: AbortSignal | (() => AbortSignal);
  /**
   * The body's declared length (default 0: none, or chunked): up to `bodyReservationBytes` of it is
   * counted against `maxInflightBodyBytes` from admission on, the rest as it arrives.
   */
  bodyBytes?: number;
  /** Whose share of the body budget the body counts against (`maxClientBodyBytes`); none: no share. */
  client?: string;
}

/** A granted slot; call `release()` exactly when the request is finished (idempotent). */
export interface AdmissionTicket {
  readonly admitted: true;
  /** Time spent queued. */
  readonly queuedMs: number;
  /**
   * `bytes` more of this request's body have arrived: counted as far as the reservation made at
   * admission does not already cover them; false, counting nothing, when the budget or the client's
   * share has no room for them (a `body_budget` / `client_body_share` rejection: refuse the request).
   */
  grow(bytes: number): boolean;
  release(): void;
}

export type AdmissionResult = AdmissionTicket | AdmissionRejection;

/** Body bytes counted outside a ticket ({@link AdmissionController.charge}); `grow` always counts. */
export interface BodyCharge {
  grow(bytes: number): boolean;
  release(): void;
}

interface Waiter {
  readonly enqueuedMs: number;
  readonly bodyBytes: number;
  readonly client: string | undefined;
  readonly deadlineMs: number;
  readonly resolve: (result: AdmissionResult) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  done: boolean;
}

/**
 * Per-coordinator admission: a concurrency limit and a request-body byte budget with a bounded FIFO
 * queue and queue timeout, plus an optional per-API-key token bucket. At most one timer exists at a time (for the head of the queue),
 * and none while the queue is empty.
 */
export class AdmissionController {
  private readonly maxConcurrent: number;
  private readonly maxQueue: number;
  private readonly queueTimeoutMs: number;
  private readonly retryAfterSeconds: number;
  private readonly maxBodyBytes: number;
  private readonly reservationBytes: number;
  private readonly maxClientBodyBytes: number;
  /** Body bytes per client (granted and queued), only while non-zero. */
  private readonly clientBytes = new Map<string, number>();
  private readonly clock: Clock;
  private readonly limiter: TokenBucketLimiter | undefined;
  private readonly queue: Waiter[] = [];
  private queueHead = 0;
  private running = 0;
  private waiting = 0;
  private bodyBytes = 0;
  private timer: TimerHandle | undefined;
  private timerDueMs = Infinity;
  private closed = false;
  /** Rejections by reason (metrics). */
  readonly rejections: Record<AdmissionRejectionReason, number> = {
    rate_limited: 0,
    queue_full: 0,
    queue_timeout: 0,
    body_budget: 0,
    client_body_share: 0,
    aborted: 0,
    closed: 0,
  };

  constructor(options: AdmissionOptions) {
    if (!(options.maxConcurrent >= 1)) throw new RangeError('maxConcurrent must be >= 1');
    this.maxConcurrent = Math.floor(options.maxConcurrent);
    this.maxQueue = Math.max(0, Math.floor(options.maxQueue ?? 0));
    this.queueTimeoutMs = options.queueTimeoutMs ?? 30_000;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.maxBodyBytes = options.maxInflightBodyBytes ?? Infinity;
    if (!(this.maxBodyBytes >= 1)) throw new RangeError('maxInflightBodyBytes must be >= 1');
    this.reservationBytes = options.bodyReservationBytes ?? Infinity;
    if (!(this.reservationBytes >= 0)) throw new RangeError('bodyReservationBytes must be >= 0');
    this.maxClientBodyBytes = options.maxClientBodyBytes ?? Infinity;
    if (!(this.maxClientBodyBytes >= 1)) throw new RangeError('maxClientBodyBytes must be >= 1');
    this.clock = options.clock ?? systemClock;
    this.limiter = options.rateLimit
      ? new TokenBucketLimiter({ ...options.rateLimit, clock: this.clock })
      : undefined;
  }

  get inFlight(): number {
    return this.running;
  }

  get queued(): number {
    return this.waiting;
  }

  /** Request-body bytes counted now (admitted requests' bodies and `charge`s). */
  get inflightBodyBytes(): number {
    return this.bodyBytes;
  }

  /** Body bytes `client` holds now, its queued reservations included. */
  clientBodyBytes(client: string): number {
    return this.clientBytes.get(client) ?? 0;
  }

  /**
   * Counts the bytes of a body read for work already admitted (a direct-trigger metaserver call of an
   * admitted request), `bytes` now and what `grow` adds, until `release`: never refused (refusing
   * would fail an admitted request), but requests admitted after it wait for the room it takes.
   */
  charge(bytes: number): BodyCharge {
    let counted = 0;
    let released = false;
    const charge: BodyCharge = {
      grow: (more) => {
        if (released) return false;
        this.bodyBytes += more;
        counted += more;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.bodyBytes -= counted;
        this.drain();
      },
    };
    charge.grow(bytes);
    return charge;
  }

  /**
   * Admits a request: resolves at once when a slot is free or on rejection; otherwise queues (FIFO)
   * until a slot frees, the timeout passes, or `signal` aborts.
   */
  acquire(options: AdmissionRequest = {}): Promise<AdmissionResult> {
    return Promise.resolve(this.tryAcquire(options));
  }

  /** Synchronous part of {@link acquire}: a result, or a promise when queued. */
  tryAcquire(options: AdmissionRequest = {}): AdmissionResult | Promise<AdmissionResult> {
    if (this.closed) return this.reject('closed', 'the coordinator is shutting down');
    if (options.signal instanceof AbortSignal && options.signal.aborted)
      return this.reject('aborted', 'the request was aborted');
    if (this.limiter && options.apiKey !== undefined) {
      const taken = this.limiter.take(options.apiKey);
      if (!taken.allowed)
        return this.reject(
          'rate_limited',
          'rate limit exceeded for this API key',
          Math.ceil(taken.retryAfterMs / 1000),
        );
    }
    const bodyBytes = options.bodyBytes ?? 0;
    if (bodyBytes > this.maxBodyBytes)
      return this.reject(
        'body_budget',
        `request body of ${bodyBytes} bytes exceeds the whole in-flight body budget (${this.maxBodyBytes})`,
      );
    const { client } = options;
    const reserved = this.reservation(bodyBytes);
    // Over its share the client is refused, never queued: queued, it would hold the FIFO's head.
    if (client !== undefined && !this.clientFits(client, reserved))
      return this.reject(
        'client_body_share',
        `this client's request bodies in flight would exceed its share of the body budget (${this.maxClientBodyBytes} bytes)`,
      );
    if (this.queued === 0 && this.fits(reserved)) return this.grant(0, bodyBytes, client);
    if (this.queued >= this.maxQueue)
      return this.reject(
        'queue_full',
        this.running < this.maxConcurrent
          ? `server overloaded: request bodies in flight use ${this.bodyBytes} of ${this.maxBodyBytes} bytes, queue full`
          : `server overloaded: ${this.running} requests running, queue full`,
      );
    return new Promise<AdmissionResult>((resolve) => {
      const now = this.clock.now();
      const signal = typeof options.signal === 'function' ? options.signal() : options.signal;
      const waiter: Waiter = {
        enqueuedMs: now,
        bodyBytes,
        client,
        deadlineMs: now + this.queueTimeoutMs,
        resolve,
        signal,
        onAbort: () => {
          this.settle(waiter, this.reject('aborted', 'the request was aborted'));
          this.armTimer();
        },
        done: false,
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.addClientBytes(client, reserved); // held while queued, so queued requests respect the share
      this.queue.push(waiter);
      this.waiting += 1;
      this.armTimer();
    });
  }

  /** Rejects every queued request with `closed` and refuses new ones; running tickets may still release. */
  close(): void {
    this.closed = true;
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const waiter = this.queue[i]!;
      this.settle(waiter, this.reject('closed', 'the coordinator is shutting down'));
    }
    this.compact();
    this.disarmTimer();
  }

  /** A slot is free and `bodyBytes` more fit the body budget. */
  private fits(bodyBytes: number): boolean {
    return this.running < this.maxConcurrent && this.bodyBytes + bodyBytes <= this.maxBodyBytes;
  }

  /** What a body declared `declared` bytes long is charged before any of it arrives. */
  private reservation(declared: number): number {
    return Math.min(declared, this.reservationBytes);
  }

  private clientFits(client: string, bytes: number): boolean {
    return this.clientBodyBytes(client) + bytes <= this.maxClientBodyBytes;
  }

  private addClientBytes(client: string | undefined, bytes: number): void {
    if (client === undefined || bytes === 0) return;
    const held = this.clientBodyBytes(client) + bytes;
    if (held > 0) this.clientBytes.set(client, held);
    else this.clientBytes.delete(client);
  }

  /**
   * A ticket for a body declared `declared` bytes long (0: none or chunked) whose client's share
   * already holds its reservation when it was queued (`clientHeld`).
   */
  private grant(queuedMs: number, declared: number, client?: string, clientHeld = false): AdmissionTicket {
    this.running += 1;
    let counted = this.reservation(declared);
    this.bodyBytes += counted;
    if (!clientHeld) this.addClientBytes(client, counted);
    let arrived = 0;
    let released = false;
    return {
      admitted: true,
      queuedMs,
      grow: (bytes) => {
        if (released) return false;
        // arrived plus a reservation for the rest, never more than declared (once declared is exceeded, arrived)
        const next = arrived + bytes;
        const charge = Math.max(
          counted,
          next + Math.min(Math.max(declared - next, 0), this.reservationBytes),
        );
        const more = charge - counted;
        if (more > 0) {
          if (this.bodyBytes + more > this.maxBodyBytes) {
            this.rejections.body_budget += 1;
            return false;
          }
          if (client !== undefined && !this.clientFits(client, more)) {
            this.rejections.client_body_share += 1;
            return false;
          }
          this.bodyBytes += more;
          this.addClientBytes(client, more);
          counted = charge;
        }
        arrived = next;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.running -= 1;
        this.bodyBytes -= counted;
        this.addClientBytes(client, -counted);
        this.drain();
      },
    };
  }

  private reject(
    reason: AdmissionRejectionReason,
    message: string,
    retryAfterSeconds?: number,
  ): AdmissionRejection {
    this.rejections[reason] += 1;
    return {
      admitted: false,
      reason,
      status: reason === 'rate_limited' || reason === 'client_body_share' ? 429 : 503,
      retryAfterSeconds: Math.max(1, retryAfterSeconds ?? this.retryAfterSeconds),
      message,
    };
  }

  private settle(waiter: Waiter, result: AdmissionResult): void {
    if (waiter.done) return;
    waiter.done = true;
    this.waiting -= 1;
    if (!result.admitted) this.addClientBytes(waiter.client, -this.reservation(waiter.bodyBytes));
    waiter.signal?.removeEventListener('abort', waiter.onAbort);
    waiter.resolve(result);
  }

  /** Hands free slots to queued waiters in FIFO order. */
  private drain(): void {
    this.compact();
    while (this.queued > 0 && this.fits(this.reservation(this.queue[this.queueHead]!.bodyBytes))) {
      const waiter = this.queue[this.queueHead++]!;
      const queuedMs = this.clock.now() - waiter.enqueuedMs;
      this.settle(waiter, this.grant(queuedMs, waiter.bodyBytes, waiter.client, true));
      this.compact();
    }
    this.armTimer();
  }

  /** Skips settled waiters at the head; resets the array when empty. */
  private compact(): void {
    while (this.queueHead < this.queue.length && this.queue[this.queueHead]!.done) this.queueHead++;
    if (this.waiting === 0) {
      this.queue.length = 0;
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
  }

  private onTimer(): void {
    this.timer = undefined;
    this.timerDueMs = Infinity;
    const now = this.clock.now();
    this.compact();
    // FIFO with one timeout: deadlines are non-decreasing, so expired waiters are at the head.
    while (this.queued > 0 && this.queue[this.queueHead]!.deadlineMs <= now) {
      const waiter = this.queue[this.queueHead++]!;
      this.settle(waiter, this.reject('queue_timeout', `no capacity within ${this.queueTimeoutMs} ms`));
      this.compact();
    }
    this.armTimer();
  }

  private armTimer(): void {
    this.compact();
    if (this.queued === 0) {
      this.disarmTimer();
      return;
    }
    const due = this.queue[this.queueHead]!.deadlineMs;
    if (this.timer !== undefined && this.timerDueMs === due) return;
    this.disarmTimer();
    this.timerDueMs = due;
    this.timer = this.clock.setTimeout(() => this.onTimer(), due - this.clock.now());
  }

  private disarmTimer(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDueMs = Infinity;
  }
}
