import { systemClock, type Clock } from '../common/clock.js';
import type { Logger } from '../common/logger.js';
import type { PeerSecrets } from '../common/peer-secrets.js';
import { buildDispatchStopRequest, type MotorDispatch } from '../protocol/index.js';
import { peerPath, type PeerTransport } from './http-clients.js';
import type { ProxyMetrics } from './metrics.js';
import type { PeerAllowList } from './peer-allow-list.js';

/** On this side's own failure, tells the peer leg to stop (`peer_failed`), if it is an allowed peer. */
export class PeerStopper {
  private readonly clock: Clock;

  constructor(
    private readonly deps: {
      allow: PeerAllowList;
      metrics: ProxyMetrics;
      peers: PeerTransport;
      log: Logger;
      clock?: Clock;
      /** Sent with the stop, so the peer knows it comes from a peer (null: none configured). */
      secrets?: PeerSecrets | null;
    },
  ) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Never throws: a failed or refused stop is counted and logged. */
  async stopPeer(dispatch: MotorDispatch, why: string): Promise<void> {
    const { allow, metrics, peers, log } = this.deps;
    const peer =
      dispatch.role === 'prefill'
        ? dispatch.endpoints.decode
        : dispatch.role === 'decode'
          ? dispatch.endpoints.prefill
          : null;
    if (!peer) return;
    const origin = allow.check(peer.url);
    if (origin === null) {
      metrics.peerStops.inc({ outcome: 'refused' });
      metrics.peerRefused.inc({ use: 'stop' });
      log.warn(
        { peer: peer.url, root_request_id: dispatch.root_request_id },
        'peer stop refused: not in --peer-allow',
      );
      return;
    }
    const body = buildDispatchStopRequest({
      root_request_id: dispatch.root_request_id,
      engine_request_id: dispatch.engine_request_id,
      attempt_seq: dispatch.attempt_seq,
      pair_id: dispatch.pair_id,
      reason: 'peer_failed',
      sent_at_ms: this.clock.now(),
    });
    try {
      const r = await peers.call(
        origin,
        'POST',
        peerPath(peer.url, '/v1/dispatch/stop'),
        JSON.stringify(body),
        this.deps.secrets?.header,
      );
      metrics.peerStops.inc({ outcome: r.status === 200 ? 'sent' : 'failed' });
      log.info(
        { peer: origin, root_request_id: dispatch.root_request_id, why, status: r.status },
        'peer stopped',
      );
    } catch (err) {
      metrics.peerStops.inc({ outcome: 'failed' });
      log.warn({ err, peer: origin, why }, 'peer stop failed');
    }
  }
}
