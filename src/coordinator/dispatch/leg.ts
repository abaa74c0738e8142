import type { Dispatcher as UndiciDispatcher } from 'undici';
import { noopLegObserver, type LegObserver } from '../../observability/dispatch-observer.js';
import type { Instance } from '../instance-source.js';
import { MotorError } from '../../common/motor-error.js';
import type { LegTracking } from '../scheduling-adapter.js';
import { UpstreamAbort } from '../upstream.js';
import type { LegRole } from './leg-request.js';
import type { LegTransport } from './leg-transport.js';

export type ResponseData = UndiciDispatcher.ResponseData;

/** One engine request of an attempt. */
export class Leg {
  /** Aborting closes the leg's socket (the cheap EventEmitter signal undici accepts). */
  readonly ctl = new UpstreamAbort();
  obs: LegObserver = noopLegObserver;
  response: Promise<ResponseData> | null = null;
  /** Load tracking and circuit-breaker outcome of this leg. */
  tracking: LegTracking | null = null;
  private released = false;

  constructor(
    readonly instance: Instance,
    readonly role: LegRole,
    readonly transport: LegTransport,
    /** The instance source's claim (registry in-flight count, drain); released with the leg. */
    private readonly claim: (() => void) | undefined,
  ) {
    instance.inFlight++;
  }

  /** `err`: the failure the leg ended with (null/absent = success), for the scheduler's outcome. */
  release(err: MotorError | null = null): void {
    if (this.released) return;
    this.released = true;
    this.instance.inFlight--;
    this.tracking?.end(err);
    this.claim?.();
  }

  /** The leg is over before its attempt (a prefill leg): observed and released. */
  end(err: MotorError | null): void {
    this.obs.end(err ? err.code : null);
    this.release(err);
  }

  /** The leg's connection failed (refused, reset, closed mid-body). */
  connectionError(err: unknown): MotorError {
    const e = err as { code?: string; message?: string };
    const { instance } = this;
    return new MotorError(
      'connection_error',
      `${this.role} instance ${instance.id} (${instance.url}): ${e.code ? `${e.code} ` : ''}${e.message ?? String(err)}`,
      { instanceId: instance.id },
    );
  }
}
