import { encode } from '@msgpack/msgpack';
import { Publisher, Router } from 'zeromq';
import type { PrefixCacheListener, SimBlockKey } from './prefix-cache.js';

/**
 * The simulator's KV event publisher, in vLLM's wire format (an encoder of its own: the simulator
 * checks Motor's decoder from the outside). Facts from vllm-project/vllm
 * `vllm/distributed/kv_events.py`: `ZmqEventPublisher` sends `[topic, seq (8 bytes BE), msgpack batch]`
 * on a PUB socket, seq from 0; its ROUTER replay socket answers `[id, "", start_seq]` with every
 * buffered batch from start_seq as `[id, "", seq, payload]`, then `[id, "", -1, ""]`; it keeps
 * `buffer_steps` batches (10 000). The batch is `[ts, [event…], data_parallel_rank]`; layout `array`
 * writes events as `[tag, field…]` (msgspec `array_like`, vLLM ≤ v0.23), layout `map` as maps tagged
 * under `"type"` (PR 42892). Blocks are the prefix cache's (prefix-cache.ts), their keys the cache's
 * own 53-bit block hashes, or with `--tokenizer` vLLM's own block hashes as uint64 (the default
 * `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`), medium `GPU`; one batch per event-loop turn stands for vLLM's one per step.
 */
export type KvEventsLayout = 'array' | 'map';

export interface KvEventsPublisherOptions {
  /** ZeroMQ endpoint to bind, e.g. `tcp://127.0.0.1:5557`; port `*` = any free port. */
  endpoint: string;
  replayEndpoint: string | null;
  topic: string;
  layout: KvEventsLayout;
  bufferSteps: number;
  blockSize: number;
}

const seqBytes = (seq: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(seq);
  return b;
};
const END_SEQ = seqBytes(-1n);

export class KvEventsPublisher implements PrefixCacheListener {
  private readonly pub = new Publisher({ linger: 0 });
  private readonly router: Router | null;
  private readonly topic: Buffer;
  private pending: unknown[] = [];
  private seq = 0n;
  private readonly buffer: Array<[bigint, Uint8Array]> = [];
  /** Sends on one socket go one at a time (zeromq refuses concurrent sends). */
  private sending: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(private readonly o: KvEventsPublisherOptions) {
    this.topic = Buffer.from(o.topic, 'utf8');
    this.router = o.replayEndpoint === null ? null : new Router({ linger: 0 });
  }

  /** Binds the sockets; the bound endpoints are in `endpoint` / `replayEndpoint`. */
  static async start(o: KvEventsPublisherOptions): Promise<KvEventsPublisher> {
    const p = new KvEventsPublisher(o);
    let at = o.endpoint;
    try {
      await p.pub.bind(at);
      if (p.router !== null) await p.router.bind((at = o.replayEndpoint!));
    } catch (err) {
      p.close();
      throw new Error(`KV events endpoint ${at}: ${(err as Error).message}`);
    }
    if (p.router !== null) void p.serveReplay(p.router);
    return p;
  }

  get endpoint(): string {
    return this.pub.lastEndpoint ?? this.o.endpoint;
  }

  get replayEndpoint(): string | null {
    return this.router?.lastEndpoint ?? null;
  }

  /** Batches published so far. */
  get published(): bigint {
    return this.seq;
  }

  stored(hashes: readonly SimBlockKey[], parent: SimBlockKey | null, tokens: readonly number[]): void {
    const bs = this.o.blockSize;
    this.push(
      this.o.layout === 'array'
        ? ['BlockStored', hashes, parent, tokens, bs, null, 'GPU', null]
        : {
            type: 'BlockStored',
            block_hashes: hashes,
            parent_block_hash: parent,
            token_ids: tokens,
            block_size: bs,
            lora_id: null,
            medium: 'GPU',
            lora_name: null,
            extra_keys: hashes.map(() => null),
            group_idx: 0,
            kv_cache_spec_kind: 'full_attention',
          },
    );
  }

  removed(hash: SimBlockKey): void {
    this.push(
      this.o.layout === 'array'
        ? ['BlockRemoved', [hash], 'GPU']
        : { type: 'BlockRemoved', block_hashes: [hash], medium: 'GPU', group_idx: 0 },
    );
  }

  cleared(): void {
    this.push(this.o.layout === 'array' ? ['AllBlocksCleared'] : { type: 'AllBlocksCleared' });
  }

  close(): void {
    this.closed = true;
    if (!this.pub.closed) this.pub.close();
    if (this.router !== null && !this.router.closed) this.router.close();
  }

  private push(event: unknown): void {
    if (this.closed) return;
    if (this.pending.length === 0) setImmediate(() => this.flush());
    this.pending.push(event);
  }

  private flush(): void {
    if (this.closed || this.pending.length === 0) return;
    // vLLM block hashes are uint64 (bigint here): msgpack uint 64, as msgspec writes them
    const payload = encode([Date.now() / 1000, this.pending, 0], { useBigInt64: true });
    this.pending = [];
    const seq = this.seq++;
    this.buffer.push([seq, payload]);
    if (this.buffer.length > this.o.bufferSteps) this.buffer.shift();
    const frames = [this.topic, seqBytes(seq), payload];
    this.sending = this.sending.then(() => (this.closed ? undefined : this.pub.send(frames))).catch(() => {});
  }

  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const [id, , start] of router) {
        if (id === undefined || start === undefined || start.length !== 8) continue;
        const from = start.readBigUInt64BE(0);
        for (const [seq, payload] of [...this.buffer])
          if (seq >= from) await router.send([id, '', seqBytes(seq), payload]);
        await router.send([id, '', END_SEQ, '']);
      }
    } catch {
      // Closing the socket ends the loop.
    }
  }
}
