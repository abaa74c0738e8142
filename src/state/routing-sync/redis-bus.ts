import { createClient } from 'redis';
import type { BusHandlers, RoutingBus } from './routing-bus.js';

export interface RedisBusOptions {
  /** `redis://host:port` */
  url: string;
  /** Channel prefix shared by the replicas of one fleet. */
  channel: string;
}

/**
 * Routing state over Redis pub/sub (node-redis): one channel for all replicas, one per replica for
 * answers. The offline queue is off, so a publish while Redis is away fails at once (the sync counts
 * it) instead of piling up; node-redis reconnects and re-subscribes by itself, and each return is
 * reported as `up` so the replicas exchange state.
 */
export class RedisRoutingBus implements RoutingBus {
  readonly kind = 'redis';
  private readonly pub;
  private readonly sub;
  private self = '';
  private ready = { pub: false, sub: false };
  private up = false;
  private subscribed = false;
  private handlers: BusHandlers | null = null;

  constructor(private readonly options: RedisBusOptions) {
    const socket = {
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2000),
      connectTimeout: 2000,
    };
    this.pub = createClient({ url: options.url, disableOfflineQueue: true, socket });
    this.sub = createClient({ url: options.url, socket });
    for (const [name, client] of [
      ['pub', this.pub],
      ['sub', this.sub],
    ] as const) {
      client.on('ready', () => this.mark(name, true, ''));
      client.on('error', (err: Error) => this.mark(name, false, err.message));
      client.on('end', () => this.mark(name, false, 'connection closed'));
    }
  }

  private mark(name: 'pub' | 'sub', ready: boolean, reason: string): void {
    this.ready[name] = ready;
    this.report(reason);
  }

  /** Up = both connections ready and the channels subscribed (node-redis resubscribes on reconnect). */
  private report(reason: string): void {
    const up = this.ready.pub && this.ready.sub && this.subscribed;
    if (up === this.up) return;
    this.up = up;
    if (up) this.handlers?.up();
    else this.handlers?.down(reason);
  }

  /**
   * Resolves once subscribed, or at the first failed connection attempt (reported as `down`): a
   * replica whose Redis is away at start-up routes on its own state instead of waiting for it, and
   * node-redis keeps connecting in the background (`up` when it succeeds).
   */
  async start(self: string, handlers: BusHandlers): Promise<void> {
    this.self = self;
    this.handlers = handlers;
    const listener = (message: string) => handlers.message(message);
    const subscribed = Promise.all([this.pub.connect(), this.sub.connect()])
      .then(() => this.sub.subscribe([this.options.channel, this.directChannel(self)], listener))
      .then(() => {
        this.subscribed = true;
        this.report('');
      });
    let failed: (reason: string) => void = () => undefined;
    const firstFailure = new Promise<void>((resolve) => {
      failed = (reason) => {
        if (!this.up) handlers.down(reason);
        resolve();
      };
    });
    const onError = (err: Error) => failed(err.message);
    this.pub.once('error', onError);
    this.sub.once('error', onError);
    subscribed.catch((err: Error) => failed(err.message));
    await Promise.race([subscribed.catch(() => undefined), firstFailure]);
    this.pub.off('error', onError);
    this.sub.off('error', onError);
  }

  broadcast(text: string): boolean {
    return this.publish(this.options.channel, text);
  }

  direct(to: string, text: string): boolean {
    return this.publish(this.directChannel(to), text);
  }

  async peers(): Promise<number> {
    if (!this.up) return 0;
    const counts = await this.pub.pubSubNumSub(this.options.channel);
    return Math.max(0, Number(counts[this.options.channel] ?? 0) - 1);
  }

  async close(): Promise<void> {
    this.handlers = null;
    await Promise.allSettled([this.pub.close(), this.sub.close()]);
  }

  private publish(channel: string, text: string): boolean {
    if (!this.up) return false;
    this.pub.publish(channel, text).catch((err: Error) => this.mark('pub', false, err.message));
    return true;
  }

  private directChannel(id: string): string {
    return `${this.options.channel}:to:${id}`;
  }
}
