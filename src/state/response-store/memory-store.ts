import {
  noopStoreObserver,
  parseRecord,
  serializeRecord,
  type ResponseStore,
  type ResponseStoreLimits,
  type ResponseStoreObserver,
  type StoredResponse,
} from './response-store.js';

export interface MemoryStoreOptions extends ResponseStoreLimits {
  /** Records kept at most (`responses.memory.maxEntries`); the oldest go first. */
  readonly maxEntries: number;
  /** Stored JSON bytes kept at most (`responses.memory.maxBytes`); the oldest go first. */
  readonly maxBytes: number;
  readonly now?: () => number;
  readonly observer?: ResponseStoreObserver;
}

interface Entry {
  readonly json: string;
  readonly bytes: number;
  readonly tenant: string;
  readonly expiresAt: number;
}

/**
 * The embedded default: one process's memory, bounded by count, bytes and TTL (evicted oldest first),
 * gone on restart. Records are kept as their JSON (a read returns a fresh copy; bytes are counted exactly).
 */
export class MemoryResponseStore implements ResponseStore {
  readonly kind = 'memory';
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly now: () => number;
  private readonly observer: ResponseStoreObserver;

  constructor(private readonly opts: MemoryStoreOptions) {
    this.now = opts.now ?? Date.now;
    this.observer = opts.observer ?? noopStoreObserver;
  }

  available(): boolean {
    return true;
  }

  get size(): number {
    return this.entries.size;
  }

  get storedBytes(): number {
    return this.bytes;
  }

  put(record: StoredResponse): Promise<void> {
    const json = serializeRecord(record, this.opts);
    const bytes = Buffer.byteLength(json);
    this.remove(record.id);
    this.entries.set(record.id, {
      json,
      bytes,
      tenant: record.tenant,
      expiresAt: this.now() + this.opts.ttlSeconds * 1000,
    });
    this.bytes += bytes;
    this.evict();
    this.observer.stored(bytes);
    return Promise.resolve();
  }

  get(id: string, tenant: string): Promise<StoredResponse | null> {
    const e = this.live(id);
    const found = e !== undefined && e.tenant === tenant ? parseRecord(e.json) : null;
    this.observer.lookup(found ? 'hit' : 'miss');
    return Promise.resolve(found);
  }

  delete(id: string, tenant: string): Promise<boolean> {
    const e = this.live(id);
    if (e === undefined || e.tenant !== tenant) return Promise.resolve(false);
    this.remove(id);
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    this.entries.clear();
    this.bytes = 0;
    return Promise.resolve();
  }

  private live(id: string): Entry | undefined {
    const e = this.entries.get(id);
    if (e !== undefined && e.expiresAt <= this.now()) {
      this.remove(id);
      return undefined;
    }
    return e;
  }

  private remove(id: string): void {
    const e = this.entries.get(id);
    if (e === undefined) return;
    this.entries.delete(id);
    this.bytes -= e.bytes;
  }

  /** Map order is insertion order: the first entries are the oldest. */
  private evict(): void {
    for (const [id] of this.entries) {
      if (this.entries.size <= this.opts.maxEntries && this.bytes <= this.opts.maxBytes) return;
      this.remove(id);
    }
  }
}
