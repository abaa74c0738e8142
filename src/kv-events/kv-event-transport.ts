import { Dealer, Subscriber } from 'zeromq';

/**
 * How a subscriber reaches one engine's KV event publisher. Facts from vllm-project/vllm
 * `vllm/distributed/kv_events.py` (`ZmqEventPublisher`, identical in SGLang's
 * `python/sglang/srt/disaggregation/kv_events.py`):
 * - live: a PUB socket sends 3 frames per batch: topic (UTF-8, `""` by default), the sequence number
 *   (8 bytes, big-endian, unsigned, from 0 per publisher start), the msgpack payload
 *   (`_publisher_thread`);
 * - replay: a ROUTER socket on `replay_endpoint` takes `[identity, "", start_seq (8 bytes BE)]` and
 *   answers each buffered batch with seq ≥ start_seq as `[identity, "", seq, payload]`, then ends with
 *   seq = -1 (8 bytes BE, signed) and an empty payload (`_service_replay`); it keeps the last
 *   `buffer_steps` batches (10 000 by default, `vllm/config/kv_events.py` `KVEventsConfig`);
 * - the engine binds when its endpoint has `*` (default `tcp://*:5557`), so Motor connects to
 *   `tcp://<engine host>:5557`; a data-parallel rank r publishes on port + r.
 */
export interface KvEventMessage {
  seq: bigint;
  payload: Uint8Array;
}

export interface KvEventTransport {
  /** Live batches in arrival order; ends when the transport is closed. */
  live(): AsyncIterable<KvEventMessage>;
  /** Whether {@link replay} can be asked. */
  readonly canReplay: boolean;
  /** The publisher's buffered batches from `fromSeq` on, in order; throws on timeout or bad frames. */
  replay(fromSeq: bigint, timeoutMs: number): Promise<KvEventMessage[]>;
  close(): void;
}

/** Where one instance publishes (the instance's `kvEvents` config). */
export interface KvEventsEndpoint {
  endpoint: string;
  replayEndpoint?: string | undefined;
  topic: string;
}

export class KvEventFrameError extends Error {
  constructor(message: string) {
    super(`KV event frames: ${message}`);
    this.name = 'KvEventFrameError';
  }
}

/** The sequence number frame: 8 bytes, big-endian, signed (so the replay end marker reads -1). */
export function readSeq(frame: Uint8Array | undefined): bigint {
  if (frame === undefined || frame.length !== 8)
    throw new KvEventFrameError(`sequence frame of ${frame?.length ?? 0} bytes (expected 8)`);
  return Buffer.from(frame.buffer, frame.byteOffset, 8).readBigInt64BE(0);
}

export function seqFrame(seq: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(seq);
  return b;
}

/** `KvEventTransport` over ZeroMQ: SUB on the endpoint (topic as prefix), DEALER per replay request. */
export class ZmqKvEventTransport implements KvEventTransport {
  private readonly sub = new Subscriber({ linger: 0 });
  readonly canReplay: boolean;

  constructor(private readonly ep: KvEventsEndpoint) {
    this.canReplay = ep.replayEndpoint !== undefined;
    this.sub.connect(ep.endpoint);
    this.sub.subscribe(ep.topic);
  }

  async *live(): AsyncIterable<KvEventMessage> {
    try {
      for await (const frames of this.sub) {
        if (frames.length !== 3) throw new KvEventFrameError(`${frames.length} frames (expected 3)`);
        yield { seq: readSeq(frames[1]), payload: frames[2]! };
      }
    } catch (err) {
      // Closing the socket ends the iteration with EAGAIN / context-closed: a normal end.
      if (this.sub.closed) return;
      throw err;
    }
  }

  async replay(fromSeq: bigint, timeoutMs: number): Promise<KvEventMessage[]> {
    if (this.ep.replayEndpoint === undefined) throw new KvEventFrameError('no replay endpoint');
    const dealer = new Dealer({ linger: 0, receiveTimeout: timeoutMs, sendTimeout: timeoutMs });
    try {
      dealer.connect(this.ep.replayEndpoint);
      await dealer.send([Buffer.alloc(0), seqFrame(fromSeq)]);
      const out: KvEventMessage[] = [];
      for (;;) {
        const frames = await dealer.receive();
        if (frames.length !== 3) throw new KvEventFrameError(`replay answer of ${frames.length} frames`);
        const seq = readSeq(frames[1]);
        if (seq === -1n) return out;
        out.push({ seq, payload: frames[2]! });
      }
    } finally {
      dealer.close();
    }
  }

  close(): void {
    if (!this.sub.closed) this.sub.close();
  }
}
