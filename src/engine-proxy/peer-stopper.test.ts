import { describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import { createLogger } from '../common/logger.js';
import { parseMotorDispatch } from '../protocol/index.js';
import { FakePeerClient, type PeerScript } from './testing/fake-clients.js';
import { ProxyMetrics } from './metrics.js';
import { PeerAllowList } from './peer-allow-list.js';
import { PeerStopper } from './peer-stopper.js';
import { envelope } from './testing/index.js';

const P = 'http://prefill.test:8001';
const D = 'http://decode.test:8002';

const dispatch = (role: string, urls: { prefillUrl?: string | null; decodeUrl?: string | null }) => {
  const parsed = parseMotorDispatch(envelope(role, 'prefill_handoff_decode', { root: 'r', ...urls }));
  if (!parsed.ok) throw new Error('bad test envelope');
  return parsed.value;
};

describe('PeerStopper', () => {
  const cases: Array<{
    name: string;
    role: string;
    urls: { prefillUrl?: string | null; decodeUrl?: string | null };
    script?: PeerScript;
    calls: string[];
    outcome: string | null;
  }> = [
    {
      name: 'a prefill leg stops its decode peer',
      role: 'prefill',
      urls: { prefillUrl: P, decodeUrl: D },
      calls: [`${D} /v1/dispatch/stop`],
      outcome: 'sent',
    },
    {
      name: 'a decode leg stops its prefill peer',
      role: 'decode',
      urls: { prefillUrl: P, decodeUrl: D },
      calls: [`${P} /v1/dispatch/stop`],
      outcome: 'sent',
    },
    {
      name: 'under the peer URL path prefix',
      role: 'decode',
      urls: { prefillUrl: `${P}/x/` },
      calls: [`${P} /x/v1/dispatch/stop`],
      outcome: 'sent',
    },
    {
      name: 'a single leg has no peer',
      role: 'single',
      urls: { prefillUrl: P, decodeUrl: D },
      calls: [],
      outcome: null,
    },
    { name: 'no peer endpoint', role: 'prefill', urls: { prefillUrl: P }, calls: [], outcome: null },
    {
      name: 'peer not allowed',
      role: 'prefill',
      urls: { decodeUrl: 'http://other.test:1' },
      calls: [],
      outcome: 'refused',
    },
    {
      name: 'peer answers 500',
      role: 'prefill',
      urls: { decodeUrl: D },
      script: () => ({ status: 500, json: null }),
      calls: [`${D} /v1/dispatch/stop`],
      outcome: 'failed',
    },
    {
      name: 'peer unreachable',
      role: 'prefill',
      urls: { decodeUrl: D },
      script: () => {
        throw new Error('connect ECONNREFUSED');
      },
      calls: [`${D} /v1/dispatch/stop`],
      outcome: 'failed',
    },
  ];

  it.each(cases)('$name', async (row) => {
    const peers = new FakePeerClient(row.script);
    const metrics = new ProxyMetrics({
      active: () => 0,
      tracked: () => 0,
      prepared: () => 0,
      waiting: () => 0,
    });
    const stopper = new PeerStopper({
      allow: new PeerAllowList([P, D]),
      metrics,
      peers,
      log: createLogger('test', 'silent'),
      clock: new ManualClock(1234),
    });
    await stopper.stopPeer(dispatch(row.role, row.urls), 'engine unreachable');
    expect(peers.calls.map((c) => `${c.origin} ${c.path}`)).toEqual(row.calls);
    for (const call of peers.calls) {
      expect(call.method).toBe('POST');
      expect(call.body).toEqual({
        root_request_id: 'r',
        engine_request_id: 'r#a1',
        attempt_seq: 1,
        pair_id: 'pair-r',
        reason: 'peer_failed',
        sent_at_ms: 1234,
      });
    }
    const counted = (await metrics.peerStops.get()).values.map((v) => [v.labels.outcome, v.value]);
    expect(counted).toEqual(row.outcome === null ? [] : [[row.outcome, 1]]);
  });
});
