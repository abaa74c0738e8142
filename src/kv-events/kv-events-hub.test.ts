import { encode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import type { KvEventMessage, KvEventsEndpoint, KvEventTransport } from './kv-event-transport.js';
import { KvEventsHub } from './kv-events-hub.js';

/** A transport the test pushes live messages into (or fails), recording what was opened and closed. */
class PushTransport implements KvEventTransport {
  readonly canReplay = false;
  closed = false;
  private readonly queue: Array<KvEventMessage | Error> = [];
  private wake: (() => void) | null = null;
  /** Resolves when `live` has ended: every message queued before `close` was handed out. */
  readonly ended: Promise<void>;
  private markEnded: () => void = () => {};
  constructor(readonly ep: KvEventsEndpoint) {
    this.ended = new Promise<void>((r) => (this.markEnded = r));
  }
  push(m: KvEventMessage | Error): void {
    this.queue.push(m);
    this.wake?.();
  }
  // like a ZeroMQ socket, messages received before close are still handed out
  async *live(): AsyncIterable<KvEventMessage> {
    try {
      for (;;) {
        while (this.queue.length > 0) {
          const m = this.queue.shift()!;
          if (m instanceof Error) throw m;
          yield m;
        }
        if (this.closed) return;
        await new Promise<void>((r) => (this.wake = r));
      }
    } finally {
      this.markEnded();
    }
  }
  replay(): Promise<KvEventMessage[]> {
    return Promise.reject(new Error('no replay'));
  }
  close(): void {
    this.closed = true;
    this.wake?.();
  }
}

const stored = (seq: number, ...hashes: number[]): KvEventMessage => ({
  seq: BigInt(seq),
  payload: encode([1, [['BlockStored', hashes, null, [], 16, null, 'GPU', null]], 0]),
});

function setup() {
  const opened: PushTransport[] = [];
  const errors: string[] = [];
  let reopened: () => void = () => {};
  const hub = new KvEventsHub({
    reconnectMs: 1,
    transport: (ep) => {
      const t = new PushTransport(ep);
      opened.push(t);
      reopened();
      return t;
    },
    onError: (id, message) => errors.push(`${id}: ${message}`),
  });
  const nextOpen = () => new Promise<void>((r) => (reopened = r));
  const ep = (port: number) => ({ endpoint: `tcp://127.0.0.1:${port}`, topic: '' });
  return { hub, opened, errors, nextOpen, ep };
}

/** Resolves once the index shows `want` for the query. */
async function until(hub: KvEventsHub, query: bigint[], want: Record<string, number>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (JSON.stringify(Object.fromEntries(hub.index.prefixMatch(query))) === JSON.stringify(want)) return;
    await new Promise<void>((r) => setImmediate(r));
  }
  expect(Object.fromEntries(hub.index.prefixMatch(query))).toEqual(want);
}

describe('KvEventsHub', () => {
  it('subscribes instances that publish, and drops the blocks of one removed', async () => {
    const { hub, opened, ep } = setup();
    hub.sync([{ id: 'a', kvEvents: ep(1) }, { id: 'b', kvEvents: ep(2) }, { id: 'c' }]);
    expect(opened.map((t) => t.ep.endpoint)).toEqual(['tcp://127.0.0.1:1', 'tcp://127.0.0.1:2']);
    opened[0]!.push(stored(0, 1, 2));
    opened[1]!.push(stored(0, 1));
    await until(hub, [1n, 2n], { a: 2, b: 1 });
    hub.sync([{ id: 'b', kvEvents: ep(2) }]);
    expect(opened[0]!.closed).toBe(true);
    expect(Object.fromEntries(hub.index.prefixMatch([1n, 2n]))).toEqual({ b: 1 });
    await hub.close();
    expect(opened[1]!.closed).toBe(true);
  });

  it('a message already received when its instance is removed does not store blocks again', async () => {
    const { hub, opened, ep } = setup();
    hub.sync([{ id: 'a', kvEvents: ep(1) }]);
    opened[0]!.push(stored(0, 1));
    await until(hub, [1n], { a: 1 });
    opened[0]!.push(stored(1, 2)); // received, not yet applied
    hub.sync([]);
    await opened[0]!.ended;
    expect(hub.index.blocksOf('a')).toBe(0);
    await hub.close();
  });

  it('re-subscribes when the endpoint changes', async () => {
    const { hub, opened, ep } = setup();
    hub.sync([{ id: 'a', kvEvents: ep(1) }]);
    opened[0]!.push(stored(0, 1));
    await until(hub, [1n], { a: 1 });
    hub.sync([{ id: 'a', kvEvents: ep(3) }]);
    expect(opened.map((t) => t.closed)).toEqual([true, false]);
    expect(hub.index.blocksOf('a')).toBe(0);
    await hub.close();
  });

  it('a failed stream drops its blocks and is re-subscribed', async () => {
    const { hub, opened, errors, nextOpen, ep } = setup();
    hub.sync([{ id: 'a', kvEvents: ep(1) }]);
    opened[0]!.push(stored(0, 1));
    await until(hub, [1n], { a: 1 });
    const again = nextOpen();
    opened[0]!.push(new Error('socket gone'));
    await again;
    expect(errors).toEqual(['a: socket gone']);
    expect(hub.index.blocksOf('a')).toBe(0);
    opened[1]!.push(stored(0, 1));
    await until(hub, [1n], { a: 1 });
    await hub.close();
  });
});
