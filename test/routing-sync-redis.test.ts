import { afterAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { RedisRoutingBus } from '../src/state/routing-sync/redis-bus.js';
import { RoutingSync } from '../src/state/routing-sync/routing-sync.js';
import { RedisServer } from './helpers/redis-server.js';

let redis: RedisServer | null = null;
const syncs: RoutingSync[] = [];

afterAll(async () => {
  await Promise.all(syncs.map((s) => s.close()));
  await redis?.close();
});

describe('routing sync over a real Redis (Debian redis-server)', () => {
  it('propagates loads and index records, survives an outage and converges after it', async () => {
    redis = await RedisServer.start();
    const server = redis;
    const log = createLogger('test', 'silent');
    const mk = (id: string) => {
      const s = new RoutingSync({
        bus: new RedisRoutingBus({ url: server.url, channel: 'motor-test' }),
        log,
        replicaId: id,
        heartbeatMs: 200,
        peerTimeoutMs: 60_000,
      });
      syncs.push(s);
      return s;
    };
    const a = mk('a');
    const ia = a.newPrefixIndex(64);
    await a.start();
    expect(a.stats.warmStart).toBe('alone');
    ia.record('p1', [11, 12, 13]);
    const open = a.loads.begin('d1', { promptTokens: 50 });
    const b = mk('b');
    const ib = b.newPrefixIndex(64);
    await b.start(); // late joiner: state arrives before start() resolves
    expect(b.stats.warmStart).toBe('loaded');
    expect(ib.match([11, 12, 13])).toEqual(new Map([['p1', 3]]));
    expect(b.loads.get('d1').inflightRequests).toBe(1);

    ia.record('p2', [21, 22]);
    await vi.waitFor(() => expect(ib.match([21, 22])).toEqual(new Map([['p2', 2]])), { timeout: 10_000 });

    await server.stop();
    await vi.waitFor(() => expect(b.stats.connected).toBe(false), { timeout: 10_000 });
    expect(b.loads.get('d1').inflightRequests).toBe(0); // routes on its own state
    open.end();
    const during = a.loads.begin('d2', { promptTokens: 5 }); // made while Redis is away
    await server.restart();
    await vi.waitFor(
      () => {
        expect(b.stats.connected).toBe(true);
        expect(b.loads.get('d2').inflightRequests).toBe(1);
        expect(b.loads.get('d1').inflightRequests).toBe(0);
      },
      { timeout: 20_000 },
    );
    during.end();
    await vi.waitFor(() => expect(b.loads.get('d2').inflightRequests).toBe(0), { timeout: 10_000 });
  }, 60_000);
});
