import { systemClock, type Clock } from '../common/clock.js';
import { isPlainObject } from '../common/http.js';
import type { BootstrapAddress } from '../engine-adapters/index.js';
import { MOTOR_DISPATCH_KEY, type MotorDispatch } from '../protocol/index.js';
import { peerPath, type PeerTransport } from './http-clients.js';
import type { ProxyMetrics } from './metrics.js';
import type { PeerAllowList } from './peer-allow-list.js';
import { ProxyError } from './proxy-error.js';

const CACHE_MAX = 1024;
const CACHE_TTL_MS = 60_000;
const PARAM = `${MOTOR_DISPATCH_KEY}.endpoints.prefill.url`;

/**
 * A bootstrap decode needs its prefill engine's bootstrap address: its proxy reports it on
 * `GET /v1/motor/info`. Only allow-listed peers are asked; answers are cached per origin for a minute.
 */
export class PeerBootstrapDiscovery {
  private readonly cache = new Map<string, { address: BootstrapAddress; expiresAt: number }>();
  private readonly clock: Clock;

  constructor(
    private readonly deps: {
      allow: PeerAllowList;
      metrics: ProxyMetrics;
      peers: PeerTransport;
      clock?: Clock;
    },
  ) {
    this.clock = deps.clock ?? systemClock;
  }

  /** The address, or a 400 (no or refused URL) / 502 (peer unreachable or silent) to answer. */
  async discover(dispatch: MotorDispatch): Promise<BootstrapAddress | ProxyError> {
    const url = dispatch.endpoints.prefill?.url;
    if (!url)
      return new ProxyError('invalid_request', `${PARAM}: required for a bootstrap decode`, { param: PARAM });
    const origin = this.deps.allow.check(url);
    if (origin === null) {
      this.deps.metrics.peerRefused.inc({ use: 'bootstrap_info' });
      return new ProxyError('invalid_request', `${PARAM}: ${url} is not an allowed peer (--peer-allow)`, {
        param: PARAM,
      });
    }
    const now = this.clock.now();
    const cached = this.cache.get(origin);
    if (cached && cached.expiresAt > now) return cached.address;
    try {
      const r = await this.deps.peers.call(origin, 'GET', peerPath(url, '/v1/motor/info'));
      const b = isPlainObject(r.json) ? r.json.bootstrap : null;
      if (r.status !== 200 || !isPlainObject(b) || typeof b.host !== 'string' || typeof b.port !== 'number') {
        return new ProxyError(
          'peer_unavailable',
          `prefill peer ${origin} did not report a bootstrap address (GET /v1/motor/info answered ${r.status})`,
        );
      }
      const address = { host: b.host, port: b.port };
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      this.cache.set(origin, { address, expiresAt: now + CACHE_TTL_MS });
      return address;
    } catch (err) {
      return new ProxyError(
        'peer_unavailable',
        `prefill peer ${origin} unreachable: ${(err as Error).message}`,
      );
    }
  }
}
