import { BlockIndex } from './block-index.js';
import { KvEventSubscriber, type KvSubscriberStatus } from './kv-event-subscriber.js';
import { ZmqKvEventTransport, type KvEventsEndpoint, type KvEventTransport } from './kv-event-transport.js';
import { KV_EVENTS_DEFAULTS } from './kv-events-defaults.js';
import { NO_KV_EVENTS_OBSERVER, type KvEventsObserver } from './kv-events-observer.js';

/** An instance as the hub needs it: its id and, if it publishes, where. */
export interface KvEventsSource {
  id: string;
  kvEvents?: KvEventsEndpoint | undefined;
}

export interface KvEventsHubOptions {
  maxIndexedBlocks?: number;
  replayTimeoutMs?: number;
  reconnectMs?: number;
  observer?: KvEventsObserver;
  /** Opens the transport of one instance (default ZeroMQ); tests inject scripted ones. */
  transport?: (ep: KvEventsEndpoint) => KvEventTransport;
  onError?: (instance: string, message: string) => void;
}

export interface KvEventsHealth {
  instances: Array<KvSubscriberStatus & { blocks: number }>;
  /** Distinct blocks in the index. */
  indexedBlocks: number;
  /** Blocks forgotten to stay under `maxIndexedBlocks`. */
  forgottenBlocks: number;
}

interface Running {
  key: string;
  sub: KvEventSubscriber;
  transport: KvEventTransport;
  done: Promise<void>;
  timer?: NodeJS.Timeout;
}

const endpointKey = (ep: KvEventsEndpoint) => `${ep.endpoint} ${ep.replayEndpoint ?? ''} ${ep.topic}`;

/**
 * One subscriber per instance that publishes KV events, all feeding one {@link BlockIndex}. `sync`
 * follows the live instance set: a new instance is subscribed, a removed one (or one whose endpoint
 * changed) is unsubscribed and its blocks dropped. A stream that fails is re-subscribed after
 * `reconnectMs`, its blocks dropped meanwhile (the engine may have restarted).
 *
 * createCoordinatorApp builds one hub from `config.kvEvents`; the `precise-prefix` scorer reads its
 * index through src/coordinator/kv-routing/kv-prediction.ts (`index.prefixMatch` of the prompt's block keys).
 */
export class KvEventsHub {
  readonly index: BlockIndex;
  private readonly running = new Map<string, Running>();
  private readonly observer: KvEventsObserver;
  private closed = false;

  constructor(private readonly opts: KvEventsHubOptions = {}) {
    this.index = new BlockIndex(opts.maxIndexedBlocks);
    this.observer = opts.observer ?? NO_KV_EVENTS_OBSERVER;
  }

  sync(instances: Iterable<KvEventsSource>): void {
    if (this.closed) return;
    const wanted = new Map<string, KvEventsEndpoint>();
    for (const inst of instances) if (inst.kvEvents !== undefined) wanted.set(inst.id, inst.kvEvents);
    for (const [id, r] of this.running) {
      const ep = wanted.get(id);
      if (ep === undefined || endpointKey(ep) !== r.key) this.stop(id);
    }
    for (const [id, ep] of wanted) if (!this.running.has(id)) this.start(id, ep);
  }

  status(): KvSubscriberStatus[] {
    return [...this.running.values()].map((r) => r.sub.status());
  }

  /** Index health for metrics and the dashboard: per subscribed instance, and the index as a whole. */
  health(): KvEventsHealth {
    return {
      instances: this.status().map((s) => ({ ...s, blocks: this.index.blocksOf(s.instance) })),
      indexedBlocks: this.index.size,
      forgottenBlocks: this.index.evicted,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const done = [...this.running.values()].map((r) => r.done);
    for (const id of [...this.running.keys()]) this.stop(id);
    await Promise.allSettled(done);
  }

  private start(id: string, ep: KvEventsEndpoint): void {
    const transport = (this.opts.transport ?? ((e) => new ZmqKvEventTransport(e)))(ep);
    const sub = new KvEventSubscriber(id, transport, this.index, {
      replayTimeoutMs: this.opts.replayTimeoutMs ?? KV_EVENTS_DEFAULTS.replayTimeoutMs,
      observer: this.observer,
    });
    const r: Running = { key: endpointKey(ep), sub, transport, done: Promise.resolve() };
    r.done = sub.run().catch((err: unknown) => {
      if (this.running.get(id) !== r) return;
      this.opts.onError?.(id, (err as Error).message);
      transport.close();
      this.index.clearInstance(id);
      r.timer = setTimeout(() => {
        if (this.running.get(id) !== r || this.closed) return;
        this.running.delete(id);
        this.start(id, ep);
      }, this.opts.reconnectMs ?? KV_EVENTS_DEFAULTS.reconnectMs);
      r.timer.unref();
    });
    this.running.set(id, r);
  }

  private stop(id: string): void {
    const r = this.running.get(id);
    if (r === undefined) return;
    this.running.delete(id);
    clearTimeout(r.timer);
    r.sub.stop();
    r.transport.close();
    this.index.clearInstance(id);
  }
}
