import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import type { KvEventsObserver } from '../src/kv-events/kv-events-observer.js';
import { KvEventsHub } from '../src/kv-events/kv-events-hub.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/server.js';
import { post } from '../src/simulator/testing/index.js';

/**
 * The KV event path end to end over loopback TCP: the simulator publishes its prefix cache's
 * BlockStored / BlockRemoved / AllBlocksCleared in vLLM's format (both layouts), Motor's hubs
 * subscribe with ZeroMQ, and their index predicts what the simulator's cache holds.
 */

const BLOCK = 4;
const seq = (n: number, start: number): number[] => Array.from({ length: n }, (_, i) => start + i);

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of open.splice(0).reverse()) await c.close();
});

/** A hub whose `next(pred)` resolves on the first applied batch after which `pred()` holds. */
function watchedHub() {
  const waiters: Array<{ pred: () => boolean; resolve: () => void }> = [];
  const log: string[] = [];
  const observer: KvEventsObserver = {
    batch: () => {
      for (const w of [...waiters])
        if (w.pred()) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
    },
    gap: (_i, missed) => log.push(`gap:${missed}`),
    replay: (_i, outcome) => log.push(`replay:${outcome}`),
    resync: (_i, reason) => log.push(`resync:${reason}`),
  };
  const hub = new KvEventsHub({ observer, replayTimeoutMs: 5_000 });
  open.push(hub);
  const next = (pred: () => boolean) =>
    pred() ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ pred, resolve }));
  return { hub, next, log };
}

async function complete(url: string, prompt: number[]): Promise<void> {
  const r = await post(url, '/v1/completions', { model: 'motor-sim-7b', prompt, max_tokens: 1 });
  expect(r.status).toBe(200);
}

describe.each(['map', 'array'] as const)('KV events: simulator → hub over TCP (layout %s)', (layout) => {
  it('the index follows stores, tail-first evictions and a clear; a late hub replays from 0', async () => {
    const sim: RunningSimulator = await startSimulator(
      {
        timeScale: 0,
        blockSize: BLOCK,
        kvBlocks: 6,
        kvEventsEndpoint: 'tcp://127.0.0.1:*',
        kvEventsReplayEndpoint: 'tcp://127.0.0.1:*',
        kvEventsLayout: layout,
      },
      createLogger('kv-events-test', 'silent'),
    );
    open.push(sim);
    const cache = sim.core.cache;
    const source = { id: 'sim', kvEvents: { endpoint: sim.kvEvents!.endpoint, topic: '' } };
    const withReplay = {
      ...source,
      kvEvents: { ...source.kvEvents, replayEndpoint: sim.kvEvents!.replayEndpoint! },
    };
    let probes = 0;
    /** ZeroMQ subscriptions take effect asynchronously: publish one-block probes until `hub` sees one. */
    const join = async (w: ReturnType<typeof watchedHub>) => {
      const seen = () => (w.hub.status()[0]?.batches ?? 0) > 0;
      const joined = w.next(seen);
      let inflight: Promise<void> = Promise.resolve();
      while (!seen() && probes < 500) {
        inflight = complete(sim.url, seq(BLOCK + 1, 10_000 + 10 * probes++));
        await Promise.race([joined, inflight]);
      }
      await Promise.all([joined, inflight]);
    };

    const one = watchedHub();
    one.hub.sync([source]);
    await join(one);
    const joinLog = one.log.splice(0); // probes published before the subscription took: a gap, no replay
    expect(joinLog.join(' ')).toMatch(/^(gap:\d+ resync:gap)?$/);
    cache.clear();
    await one.next(() => one.hub.index.blocksOf('sim') === 0);

    const held = (hub: KvEventsHub, p: number[]) =>
      hub.index.prefixMatch(cache.blockHashes(p)).get('sim') ?? 0;
    const a = seq(4 * BLOCK + 1, 0); // 4 full blocks
    const b = seq(3 * BLOCK + 1, 1000); // 3 more: 7 > 6 blocks, so one of a's goes — its tail
    await complete(sim.url, a);
    await one.next(() => held(one.hub, a) === 4);
    await complete(sim.url, b);
    await one.next(() => held(one.hub, b) === 3 && one.hub.index.blocksOf('sim') === cache.size);
    expect(held(one.hub, a)).toBe(3);
    expect(one.log).toEqual([]);

    // A second hub joins late: its first batch is past 0, so it asks the replay endpoint from 0.
    const two = watchedHub();
    two.hub.sync([withReplay]);
    await join(two);
    expect(two.log.slice(0, 2)).toEqual([expect.stringMatching(/^gap:\d+$/), 'replay:ok']);
    // Both converge on what the simulator's cache holds (nothing is stored any more), prompt by prompt.
    const engine = [a, b].map((p) => cache.lookup(cache.blockHashes(p), p.length + 1) / BLOCK);
    const predicts = (hub: KvEventsHub) =>
      hub.index.blocksOf('sim') === cache.size && [a, b].every((p, i) => held(hub, p) === engine[i]);
    await Promise.all([one.next(() => predicts(one.hub)), two.next(() => predicts(two.hub))]);
    expect(two.hub.index.blocksOf('sim')).toBe(cache.size);

    cache.clear();
    await two.next(() => two.hub.index.blocksOf('sim') === 0);
  });
});
