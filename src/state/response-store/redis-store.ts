import { createClient } from 'redis';
import { MotorError } from '../../common/motor-error.js';
import {
  noopStoreObserver,
  parseRecord,
  serializeRecord,
  type ResponseStore,
  type ResponseStoreLimits,
  type ResponseStoreObserver,
  type StoredResponse,
} from './response-store.js';

export interface RedisStoreOptions extends ResponseStoreLimits {
  /** `redis://[user:password@]host:port[/db]` (`responses.redis.url`). */
  readonly url: string;
  /** Key prefix (`responses.redis.keyPrefix`), so several deployments can share one Redis. */
  readonly keyPrefix: string;
  /** Bound on one command (`responses.redis.commandTimeoutMs`). */
  readonly commandTimeoutMs: number;
  readonly observer?: ResponseStoreObserver;
  readonly onError?: (err: Error) => void;
}

/**
 * Redis as the shared, durable store (coordinator replicas, `--workers`, restarts): one key per
 * response, written whole with `SET … EX ttl` (atomic: nothing half-written; Redis expires it). Durability
 * is Redis's own (AOF, docs/apis.md). Commands fail at once while the connection is down (no offline
 * queue), so a request never waits on an absent Redis; the client reconnects in the background.
 */
export class RedisResponseStore implements ResponseStore {
  readonly kind = 'redis';
  private readonly client;
  private readonly observer: ResponseStoreObserver;

  constructor(private readonly opts: RedisStoreOptions) {
    this.observer = opts.observer ?? noopStoreObserver;
    this.client = createClient({
      url: opts.url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: opts.commandTimeoutMs,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2_000),
      },
    });
    // node-redis emits 'error' on every failed (re)connect: without a listener it would throw
    this.client.on('error', (err: Error) => opts.onError?.(err));
  }

  /** Starts connecting; resolves once connected or at the first failure (the client keeps retrying). */
  async start(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.client.once('ready', resolve);
      this.client.once('error', () => resolve());
      this.client.connect().catch(() => resolve());
    });
  }

  available(): boolean {
    return this.client.isReady;
  }

  async put(record: StoredResponse): Promise<void> {
    const json = serializeRecord(record, this.opts);
    await this.command('put', () => this.client.set(this.key(record.id), json, { EX: this.opts.ttlSeconds }));
    this.observer.stored(Buffer.byteLength(json));
  }

  async get(id: string, tenant: string): Promise<StoredResponse | null> {
    const json = await this.command('get', () => this.client.get(this.key(id)));
    const record = typeof json === 'string' ? parseRecord(json) : null;
    const found = record !== null && record.tenant === tenant ? record : null;
    this.observer.lookup(found ? 'hit' : 'miss');
    return found;
  }

  async delete(id: string, tenant: string): Promise<boolean> {
    const record = await this.get(id, tenant);
    if (record === null) return false;
    return (await this.command('delete', () => this.client.del(this.key(id)))) === 1;
  }

  async close(): Promise<void> {
    if (this.client.isOpen) await this.client.close();
    else this.client.destroy();
  }

  private key(id: string): string {
    return `${this.opts.keyPrefix}${id}`;
  }

  private async command<T>(op: 'put' | 'get' | 'delete', run: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      if (!this.client.isReady) throw new Error('not connected');
      return await Promise.race([
        run(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer in ${this.opts.commandTimeoutMs} ms`)),
            this.opts.commandTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      this.observer.error(op);
      throw new MotorError(
        'store_unavailable',
        `the response store (Redis) is unavailable: ${(err as Error).message}`,
      );
    } finally {
      clearTimeout(timer);
    }
  }
}
