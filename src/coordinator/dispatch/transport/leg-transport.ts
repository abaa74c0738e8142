import type { Logger } from '../../../common/logger.js';
import type { PeerSecrets } from '../../../common/peer-secrets.js';
import type { RequestObserver } from '../../../observability/dispatch-observer.js';
import type { DispatchStopReason, PrefillResult } from '../../../protocol/index.js';
import type { Instance } from '../../fleet/instance-source.js';
import { MotorError } from '../../../common/motor-error.js';
import type { PdFlow } from '../../scheduling-bridge/route.js';
import type { Upstreams } from '../../fleet/upstream.js';
import { DirectTransport } from './direct-transport.js';
import type { AttemptIds, LegInput, LegRequest } from './leg-request.js';
import { ProxyTransport } from './proxy-transport.js';

/** A failed attempt's stop, as each instance of its route is told. */
export interface StopOrder {
  readonly ids: AttemptIds;
  readonly reason: DispatchStopReason;
  /** The `POST /v1/dispatch/stop` body (built once for both instances). */
  readonly body: string;
  readonly obs: RequestObserver;
  /** Whether the attempt opened a leg on `instance`. */
  opened(instance: Instance): boolean;
}

/**
 * How legs reach one kind of instance. `mode: proxy`: the client body plus the Motor envelope, sent to
 * an engine proxy that translates. `mode: direct`: engine-native fields built by the engine adapter,
 * sent to a stock engine. Flows speak to this interface and never read `instance.mode`.
 */
export interface LegTransport {
  /** The HTTP body and headers of one leg. */
  request(instance: Instance, input: LegInput): LegRequest;
  /** The prefill leg's JSON answer as this attempt's PrefillResult, or the `protocol_error`. */
  prefillResult(instance: Instance, json: unknown, ids: AttemptIds, flow: PdFlow): PrefillResult | MotorError;
  /** Tells `instance` to stop its part of a failed attempt (fire and forget; failures are logged). */
  stop(instance: Instance, order: StopOrder): void;
  /**
   * Trigger flow: where the decode engine asks for its prefill. null: at the prefill instance (its
   * engine proxy holds the prefill leg, sent at once). A URL: this coordinator's metaserver (a stock
   * prefill engine has none) carrying the attempt's `token`, and the prefill leg starts when that
   * call brings the decode's KV fields.
   */
  triggerMetaserverUrl(token: string): string | null;
  /**
   * Headers of a request forwarded unchanged to the instance's engine (a route with no P/D split):
   * an engine proxy passes unknown routes through behind its peer secret; a stock engine needs none.
   */
  passThroughHeaders(): Readonly<Record<string, string>>;
}

export interface TransportDeps {
  upstreams: Pick<Upstreams, 'postJson'>;
  /** Timeout of a stop or abort call. */
  stopMs: number;
  log: Logger;
  /** Base URL engines use to reach this coordinator (direct trigger metaserver). */
  publicUrl: () => string;
  /** Engine proxies: the shared secret sent on every leg and stop (absent = none). */
  peerSecrets?: PeerSecrets | null | undefined;
}

/** The transport of each instance mode; the one place `instance.mode` is read. */
export class LegTransports {
  private readonly proxy: LegTransport;
  private readonly direct: LegTransport;

  constructor(deps: TransportDeps) {
    this.proxy = new ProxyTransport(deps);
    this.direct = new DirectTransport(deps);
  }

  for(instance: Instance): LegTransport {
    return instance.mode === 'proxy' ? this.proxy : this.direct;
  }
}

/** A prefill answer that breaks the protocol (the prefill leg failed; a retry may help). */
export function prefillProtocolError(instance: Instance, message: string): MotorError {
  return new MotorError('protocol_error', `prefill instance ${instance.id}: ${message}`, {
    instanceId: instance.id,
  });
}
