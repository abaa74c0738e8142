import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { BlockIndex } from './block-index.js';
import { KvEventSubscriber } from './kv-event-subscriber.js';
import type { KvEventMessage, KvEventTransport } from './kv-event-transport.js';
import type { KvEventsObserver } from './kv-events-observer.js';

type Ev = ['stored', number[], string?] | ['removed', number[]] | ['cleared'];

/** A batch in vLLM's array layout (kv-event-decoder.ts), ts 1000 s. */
function batch(seq: number, ...events: Ev[]): KvEventMessage {
  const raw = events.map((e) =>
    e[0] === 'stored'
      ? ['BlockStored', e[1], null, e[1].flatMap(() => [1, 2]), 2, null, e[2] ?? 'GPU', null]
      : e[0] === 'removed'
        ? ['BlockRemoved', e[1], 'GPU']
        : ['AllBlocksCleared'],
  );
  return { seq: BigInt(seq), payload: encode([1000, raw, 0]) };
}

/** A transport whose replay buffer the test sets; `replay` = null means no replay endpoint. */
function transport(replay: KvEventMessage[] | 'throws' | null): KvEventTransport & { asked: bigint[] } {
  const asked: bigint[] = [];
  return {
    asked,
    canReplay: replay !== null,
    async *live() {},
    async replay(from) {
      asked.push(from);
      if (replay === 'throws') throw new Error('timeout');
      return (replay ?? []).filter((m) => m.seq >= from);
    },
    close() {},
  };
}

function recorder(): KvEventsObserver & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    batch: () => {},
    gap: (_i, missed) => log.push(`gap:${missed}`),
    replay: (_i, outcome) => log.push(`replay:${outcome}`),
    resync: (_i, reason) => log.push(`resync:${reason}`),
  };
}

async function run(t: KvEventTransport, live: KvEventMessage[]) {
  const index = new BlockIndex();
  const observer = recorder();
  const sub = new KvEventSubscriber('a', t, index, {
    replayTimeoutMs: 100,
    observer,
    nowMs: () => 1_000_250,
  });
  for (const m of live) await sub.receive(m);
  return { blocks: Object.fromEntries(index.prefixMatch([1n, 2n, 3n, 4n])), log: observer.log, sub };
}

describe('KvEventSubscriber', () => {
  it.each<[string, KvEventMessage[] | 'throws' | null, KvEventMessage[], Record<string, number>, string[]]>([
    ['in-order stream', null, [batch(0, ['stored', [1, 2, 3]]), batch(1, ['removed', [3]])], { a: 2 }, []],
    [
      'gap filled by replay (the missed removal applies)',
      [batch(0, ['stored', [1, 2, 3]]), batch(1, ['removed', [2]]), batch(2, ['stored', [9]])],
      [batch(0, ['stored', [1, 2, 3]]), batch(2, ['stored', [9]])],
      { a: 1 },
      ['gap:1', 'replay:ok'],
    ],
    [
      'late join: replay from 0',
      [batch(0, ['stored', [1]]), batch(1, ['stored', [2]])],
      [batch(2, ['stored', [3]])],
      { a: 3 },
      ['gap:2', 'replay:ok'],
    ],
    [
      'gap without a replay endpoint: resync',
      null,
      [batch(0, ['stored', [1, 2]]), batch(3, ['stored', [7]])],
      {},
      ['gap:2', 'resync:gap'],
    ],
    [
      'replay fails: resync',
      'throws',
      [batch(0, ['stored', [1, 2]]), batch(2, ['stored', [7]])],
      {},
      ['gap:1', 'replay:failed', 'resync:gap'],
    ],
    [
      'replay buffer no longer reaches back: resync, then what it has',
      [batch(2, ['stored', [1]])],
      [batch(0, ['stored', [5]]), batch(3, ['stored', [2]])],
      { a: 2 },
      ['gap:2', 'replay:incomplete', 'resync:gap'],
    ],
    [
      'engine restart (sequence back to 0) drops its blocks',
      null,
      [batch(0, ['stored', [1, 2]]), batch(1, ['stored', [3]]), batch(0, ['stored', [9]])],
      {},
      ['resync:restart'],
    ],
    [
      'AllBlocksCleared drops the blocks stored before it',
      null,
      [batch(0, ['stored', [1, 2]]), batch(1, ['cleared'], ['stored', [1]])],
      { a: 1 },
      [],
    ],
    ['CPU-medium blocks are not indexed', null, [batch(0, ['stored', [1, 2], 'CPU'])], {}, []],
    [
      'a batch that does not decode: resync',
      null,
      [batch(0, ['stored', [1]]), { seq: 1n, payload: Uint8Array.of(0xc1) }],
      {},
      ['resync:bad_batch'],
    ],
  ])('%s', async (_name, replay, live, blocks, log) => {
    const r = await run(transport(replay), live);
    expect(r.blocks).toEqual(blocks);
    expect(r.log).toEqual(log);
  });

  it('reports sequence, lag and counts', async () => {
    const { sub } = await run(transport(null), [batch(0, ['stored', [1]]), batch(1, ['stored', [2]])]);
    expect(sub.status()).toMatchObject({ lastSeq: 1n, batches: 2, gaps: 0, resyncs: 0, lagMs: 250 });
  });
});
