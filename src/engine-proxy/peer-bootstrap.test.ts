import { describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import { parseMotorDispatch } from '../protocol/index.js';
import { FakePeerClient, type PeerScript } from './testing/fake-clients.js';
import { ProxyMetrics } from './metrics.js';
import { PeerAllowList } from './peer-allow-list.js';
import { PeerBootstrapDiscovery } from './peer-bootstrap.js';
import { ProxyError } from './proxy-error.js';
import { envelope } from './testing/index.js';

const PEER = 'http://prefill.test:8001';
const PARAM = '_motor_dispatch.endpoints.prefill.url';

function discovery(script: PeerScript, clock = new ManualClock(0)) {
  const peers = new FakePeerClient(script);
  const metrics = new ProxyMetrics({
    active: () => 0,
    tracked: () => 0,
    prepared: () => 0,
    waiting: () => 0,
  });
  const found = new PeerBootstrapDiscovery({ allow: new PeerAllowList([PEER]), metrics, peers, clock });
  return { found, peers, metrics };
}

const dispatchTo = (prefillUrl: string | null) => {
  const parsed = parseMotorDispatch(envelope('decode', 'concurrent_engine_sync', { root: 'r', prefillUrl }));
  if (!parsed.ok) throw new Error('bad test envelope');
  return parsed.value;
};

describe('PeerBootstrapDiscovery', () => {
  const cases: Array<{
    name: string;
    url: string | null;
    script: PeerScript;
    want:
      | { host: string; port: number }
      | { code: string; status: number; message: string; param: string | null };
  }> = [
    {
      name: 'reported address',
      url: `${PEER}/base`,
      script: () => ({ status: 200, json: { bootstrap: { host: '10.0.0.7', port: 8998 } } }),
      want: { host: '10.0.0.7', port: 8998 },
    },
    {
      name: 'no prefill url',
      url: null,
      script: () => ({ status: 200, json: {} }),
      want: {
        code: 'invalid_request',
        status: 400,
        message: `${PARAM}: required for a bootstrap decode`,
        param: PARAM,
      },
    },
    {
      name: 'peer not allowed',
      url: 'http://elsewhere.test:1',
      script: () => ({ status: 200, json: {} }),
      want: {
        code: 'invalid_request',
        status: 400,
        message: `${PARAM}: http://elsewhere.test:1 is not an allowed peer (--peer-allow)`,
        param: PARAM,
      },
    },
    {
      name: 'peer answers without an address',
      url: PEER,
      script: () => ({ status: 200, json: { bootstrap: null } }),
      want: {
        code: 'peer_unavailable',
        status: 502,
        message: `prefill peer ${PEER} did not report a bootstrap address (GET /v1/motor/info answered 200)`,
        param: null,
      },
    },
    {
      name: 'peer answers 404',
      url: PEER,
      script: () => ({ status: 404, json: { bootstrap: { host: 'h', port: 1 } } }),
      want: {
        code: 'peer_unavailable',
        status: 502,
        message: `prefill peer ${PEER} did not report a bootstrap address (GET /v1/motor/info answered 404)`,
        param: null,
      },
    },
    {
      name: 'peer with a malformed address',
      url: PEER,
      script: () => ({ status: 200, json: { bootstrap: { host: 'h', port: '1' } } }),
      want: {
        code: 'peer_unavailable',
        status: 502,
        message: `prefill peer ${PEER} did not report a bootstrap address (GET /v1/motor/info answered 200)`,
        param: null,
      },
    },
    {
      name: 'peer unreachable',
      url: PEER,
      script: () => {
        throw new Error('connect ECONNREFUSED');
      },
      want: {
        code: 'peer_unavailable',
        status: 502,
        message: `prefill peer ${PEER} unreachable: connect ECONNREFUSED`,
        param: null,
      },
    },
  ];

  it.each(cases)('$name', async ({ url, script, want }) => {
    const { found } = discovery(script);
    const got = await found.discover(dispatchTo(url));
    if ('host' in want) expect(got).toEqual(want);
    else {
      expect(got).toBeInstanceOf(ProxyError);
      expect(got).toMatchObject(want);
    }
  });

  it('asks under the peer URL path prefix, and caches per origin for a minute', async () => {
    const clock = new ManualClock(1_000);
    const { found, peers } = discovery(
      () => ({ status: 200, json: { bootstrap: { host: 'h', port: 1 } } }),
      clock,
    );
    await found.discover(dispatchTo(`${PEER}/base/`));
    await found.discover(dispatchTo(PEER));
    clock.advance(59_999);
    await found.discover(dispatchTo(PEER));
    expect(peers.calls.map((c) => `${c.origin} ${c.method} ${c.path}`)).toEqual([
      `${PEER} GET /base/v1/motor/info`,
    ]);
    clock.advance(1);
    await found.discover(dispatchTo(PEER));
    expect(peers.calls).toHaveLength(2);
  });

  it('does not cache failures', async () => {
    let answer: unknown = null;
    const { found, peers } = discovery(() => ({ status: 200, json: { bootstrap: answer } }));
    expect(await found.discover(dispatchTo(PEER))).toBeInstanceOf(ProxyError);
    answer = { host: 'h', port: 2 };
    expect(await found.discover(dispatchTo(PEER))).toEqual({ host: 'h', port: 2 });
    expect(peers.calls).toHaveLength(2);
  });

  it('counts refused peers', async () => {
    const { found, metrics } = discovery(() => ({ status: 200, json: {} }));
    await found.discover(dispatchTo('http://elsewhere.test:1'));
    expect((await metrics.peerRefused.get()).values).toMatchObject([
      { labels: { use: 'bootstrap_info' }, value: 1 },
    ]);
  });
});
