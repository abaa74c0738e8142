import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { LoadTracker, Scheduler, type SchedulableInstance } from '../../scheduling/index.js';
import { instance, request } from '../../scheduling/testing/index.js';
import { parseRoutingMessage } from './routing-messages.js';
import { RoutingSync } from './routing-sync.js';
import { MemoryBusHub } from './testing/memory-bus.js';

const log = createLogger('test', 'silent');
const syncs: RoutingSync[] = [];
afterEach(async () => {
  await Promise.all(syncs.splice(0).map((s) => s.close()));
});

function replica(hub: MemoryBusHub, id: string): RoutingSync {
  const s = new RoutingSync({ bus: hub.bus(), log, replicaId: id, flushMs: 0, warmStartTimeoutMs: 60_000 });
  syncs.push(s);
  return s;
}

describe('RoutingSync', () => {
  it('applies another replica’s loads, prefill completion and end', async () => {
    const hub = new MemoryBusHub();
    const a = replica(hub, 'a');
    const b = replica(hub, 'b');
    await a.start();
    await b.start();
    const h = a.loads.begin('d1', { promptTokens: 100, cachedPromptTokens: 40 });
    await vi.waitFor(() =>
      expect(b.loads.get('d1')).toEqual({
        inflightRequests: 1,
        inflightTokens: 100,
        pendingPrefillTokens: 60,
      }),
    );
    h.firstToken();
    await vi.waitFor(() => expect(b.loads.get('d1').pendingPrefillTokens).toBe(0));
    h.end();
    h.end(); // idempotent: one end travels
    await vi.waitFor(() => expect(b.loads.get('d1').inflightRequests).toBe(0));
    expect(a.loads.get('d1').inflightRequests).toBe(0);
  });

  it('shares routed-history index records', async () => {
    const hub = new MemoryBusHub();
    const a = replica(hub, 'a');
    const b = replica(hub, 'b');
    const ia = a.newPrefixIndex(64);
    const ib = b.newPrefixIndex(64);
    await a.start();
    await b.start();
    ia.record('p1', [1, 2, 3]);
    await vi.waitFor(() => expect(ib.match([1, 2, 3, 4])).toEqual(new Map([['p1', 3]])));
  });

  it('bus away: drops the other replicas’ loads, routes alone; back: converges', async () => {
    const hub = new MemoryBusHub();
    const a = replica(hub, 'a');
    const b = replica(hub, 'b');
    await a.start();
    await b.start();
    const first = a.loads.begin('d1', { promptTokens: 10 });
    await vi.waitFor(() => expect(b.loads.get('d1').inflightRequests).toBe(1));
    hub.setDown(true);
    expect(b.loads.get('d1').inflightRequests).toBe(0); // nobody would end it
    expect(b.stats).toMatchObject({ connected: false, outages: 1 });
    first.end();
    const second = a.loads.begin('d2', { promptTokens: 10 }); // made while the bus is away
    expect(a.stats.opsDropped).toBeGreaterThan(0);
    hub.setDown(false);
    await vi.waitFor(() => expect(b.loads.get('d2').inflightRequests).toBe(1));
    expect(b.loads.get('d1').inflightRequests).toBe(0);
    second.end();
    await vi.waitFor(() => expect(b.loads.get('d2').inflightRequests).toBe(0));
  });

  it('a late replica loads the index and open loads before start() resolves', async () => {
    const hub = new MemoryBusHub();
    const a = replica(hub, 'a');
    const ia = a.newPrefixIndex(64);
    await a.start();
    ia.record('p1', [7, 8, 9]);
    a.loads.begin('d1', { promptTokens: 5 });
    const c = replica(hub, 'c');
    const ic = c.newPrefixIndex(64);
    await c.start();
    expect(c.stats.warmStart).toBe('loaded');
    expect(ic.match([7, 8, 9])).toEqual(new Map([['p1', 3]]));
    expect(c.loads.get('d1').inflightRequests).toBe(1);
  });

  it('a replica alone starts at once', async () => {
    const a = replica(new MemoryBusHub(), 'a');
    await a.start();
    expect(a.stats.warmStart).toBe('alone');
  });

  it('batches the operations of one tick into one message', async () => {
    const hub = new MemoryBusHub();
    const a = replica(hub, 'a');
    const b = replica(hub, 'b');
    await a.start();
    await b.start();
    const before = hub.delivered;
    for (let i = 0; i < 10; i++) a.loads.begin(`d${i}`, { promptTokens: 1 });
    await vi.waitFor(() => expect(b.stats.opsReceived).toBe(10));
    expect(hub.delivered - before).toBe(1);
  });

  it('8 concurrent streams over two decodes split 4/4 through two replicas behind a random balancer', async () => {
    // the balancer's draws (a fixed unbalanced sequence): 3 to one replica, 5 to the other
    const draws = [0, 0, 0, 1, 1, 1, 1, 1];
    const fleet: SchedulableInstance[] = [
      instance('p', 'prefill'),
      instance('d1', 'decode'),
      instance('d2', 'decode'),
    ];
    const split = async (shared: boolean): Promise<Record<string, number>> => {
      const hub = new MemoryBusHub();
      const rs = [replica(hub, 'a'), replica(hub, 'b')];
      for (const r of rs) await r.start();
      const schedulers = rs.map(
        (r, idx) => new Scheduler({ seed: idx + 2 }, { loadTracker: shared ? r.loads : new LoadTracker() }),
      );
      const counts: Record<string, number> = { d1: 0, d2: 0 };
      const begun = [0, 0];
      for (const [i, which] of draws.entries()) {
        const s = schedulers[which]!;
        const d = s.selectPair(request(`stream ${i}`), fleet);
        if (d.kind !== 'pair') throw new Error('expected a pair');
        counts[d.decode.id]!++;
        s.loadTracker.begin(d.decode.id, { promptTokens: 1, cachedPromptTokens: 1 }); // a stream held open
        begun[which]!++;
        const [me, other] = [rs[which]!, rs[1 - which]!];
        if (shared)
          await vi.waitFor(() => {
            expect(me.stats.opsSent).toBe(begun[which]);
            expect(other.stats.opsReceived).toBe(me.stats.opsSent);
          });
      }
      return counts;
    };
    expect(await split(true)).toEqual({ d1: 4, d2: 4 });
    // each replica counting only its own picks piles streams onto one decode
    expect(await split(false)).not.toEqual({ d1: 4, d2: 4 });
  });

  it('refuses malformed, oversized and foreign messages', () => {
    const ok = JSON.stringify({ v: 1, t: 'b', from: 'a', seq: 1, ops: [['l', '1', 'd', 3, 0]] });
    expect(parseRoutingMessage(ok, 1000)).not.toBeNull();
    for (const bad of [
      'not json',
      JSON.stringify({ v: 2, t: 'b', from: 'a', seq: 1, ops: [] }),
      JSON.stringify({ v: 1, t: 'b', from: 'a', seq: 1, ops: [['l', '1', 'd', -3, 0]] }),
      JSON.stringify({ v: 1, t: 'b', from: 'a', seq: 1, ops: [['x', '1', 'd', 'zz']] }),
      JSON.stringify({ v: 1, t: 'q', from: 'a', seq: 1 }),
    ])
      expect(parseRoutingMessage(bad, 1000), bad).toBeNull();
    expect(parseRoutingMessage(ok, 10)).toBeNull();
  });
});
