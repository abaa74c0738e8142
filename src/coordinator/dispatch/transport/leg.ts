import type { Dispatcher as UndiciDispatcher } from 'undici';
import { noopLegObserver, type LegObserver } from '../../../observability/dispatch-observer.js';
import type { Instance } from '../../fleet/instance-source.js';
import { errorForEngineStatus, MotorError, type EngineReply } from '../../../common/motor-error.js';
import type { LegTracking } from '../../scheduling-bridge/scheduling-adapter.js';
import { UpstreamAbort } from '../../fleet/upstream.js';
import type { LegRole } from './leg-request.js';
import type { LegTransport } from './leg-transport.js';
import { isUploadRefusal } from '../../../common/upload-refusal.js';

export type ResponseData = UndiciDispatcher.ResponseData;

/** Errors of a connection that was never made (Node's and undici's codes): no byte reached the engine. */
const CONNECT_ERRORS: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** One engine request of an attempt. */
export class Leg {
  /** Aborting closes the leg's socket (the cheap EventEmitter signal undici accepts). */
  readonly ctl = new UpstreamAbort();
  obs: LegObserver = noopLegObserver;
  response: Promise<ResponseData> | null = null;
  /** Load tracking and circuit-breaker outcome of this leg. */
  tracking: LegTracking | null = null;
  /** The engine's response status once its headers arrived (null before). */
  status: number | null = null;
  /** The connection was never made (refused, unresolvable, connect timeout): the engine got nothing. */
  unreached = false;
  private released = false;

  constructor(
    readonly instance: Instance,
    readonly role: LegRole,
    readonly transport: LegTransport,
    /** The instance source's claim (registry in-flight count, drain); released with the leg. */
    private readonly claim: (() => void) | undefined,
    /** Length of the leg's body (characters), for the upload-refusal rule. */
    readonly bodyChars = 0,
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

  /** Whether a failure of this leg's request is the request's own (upload-refusal.ts), not the instance's. */
  uploadRefused(err: unknown): boolean {
    return this.status === null && isUploadRefusal(err, this.bodyChars);
  }

  /** The engine's non-200 answer on this leg as a Motor error (a 413 names this leg's body size). */
  engineStatusError(reply: EngineReply): MotorError {
    return errorForEngineStatus(this.instance.id, this.role, reply, this.bodyChars);
  }

  /**
   * The leg's connection failed (refused, reset, closed mid-body). The engine's answer wins when one
   * arrived: a 4xx whose body broke off is still that 4xx; a large upload cut before any answer is
   * `upload_refused`; the rest is a `connection_error` of the instance.
   */
  connectionError(err: unknown): MotorError {
    const e = err as { code?: string; message?: string };
    const { instance, status } = this;
    const why = `${e.code ? `${e.code} ` : ''}${e.message ?? String(err)}`;
    if (status === null && e.code !== undefined && CONNECT_ERRORS.has(e.code)) this.unreached = true;
    if (status !== null && status >= 400 && status < 500 && status !== 408 && status !== 429) {
      const body = Buffer.from(JSON.stringify({ error: { message: `engine answered ${status} (${why})` } }));
      return this.engineStatusError({ status, body, contentType: 'application/json' });
    }
    if (this.uploadRefused(err)) {
      return new MotorError(
        'upload_refused',
        `${this.role} engine ${instance.id} closed the connection while receiving the ${this.bodyChars}-character ` +
          `request body (${why}): the body is probably over the engine's own size limit ` +
          "(Motor's is server.maxBodyBytes); send a smaller request",
        { instanceId: instance.id },
      );
    }
    return new MotorError(
      'connection_error',
      `${this.role} instance ${instance.id} (${instance.url}): ${why}`,
      { instanceId: instance.id },
    );
  }
}
