import { AbortedError } from './timing.js';

/** What one side of a KV transfer knows about the prompt it carries. */
export interface KvPayload {
  num_tokens: number;
  /** FNV-1a of the prompt token ids: the decode checks it matches its own prompt. */
  prompt_hash: number;
  block_ids: number[];
  engine_id: string;
}

export interface KvHeldEntry {
  request_id: string;
  kind: 'handoff_prefill' | 'bootstrap_prefill' | 'trigger_decode';
  blocks: number;
  expires_at_ms: number;
}

export function promptHash(ids: readonly number[]): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < ids.length; i++) h = Math.imul(h ^ ids[i]!, 0x01000193);
  return h >>> 0;
}

/** Hands out simulated KV block ids (cycling through the capacity) and counts blocks in use. */
export class BlockAllocator {
  private next = 0;
  inUse = 0;

  constructor(private readonly capacity: number) {}

  allocate(n: number): number[] {
    const ids = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      ids[i] = this.next;
      this.next = (this.next + 1) % Math.max(1, this.capacity);
    }
    this.inUse += n;
    return ids;
  }

  free(n: number): void {
    this.inUse = Math.max(0, this.inUse - n);
  }
}

interface Held {
  payload: KvPayload;
  expiresAt: number;
  timer: NodeJS.Timeout;
}

export type PullResult = { ok: true; payload: KvPayload } | { ok: false; status: number; message: string };

/**
 * Prefill side of the handoff (NIXL / Mooncake V1): blocks computed for a `do_remote_decode`
 * request are held until a decode pulls them or the lease expires.
 */
export class HeldKv {
  private readonly held = new Map<string, Held>();

  constructor(
    private readonly blocks: BlockAllocator,
    private readonly onExpire: (requestId: string) => void = () => {},
  ) {}

  hold(requestId: string, payload: KvPayload, leaseMs: number): number {
    this.release(requestId);
    const expiresAt = Date.now() + leaseMs;
    this.held.set(requestId, { payload, expiresAt, timer: this.expireAfter(requestId, leaseMs) });
    return expiresAt;
  }

  private expireAfter(requestId: string, leaseMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (this.held.get(requestId)?.timer === timer) {
        this.drop(requestId);
        this.onExpire(requestId);
      }
    }, leaseMs);
    timer.unref();
    return timer;
  }

  /** A decode heartbeat: the lease of `requestId` runs `leaseMs` from now; false when nothing is held. */
  renew(requestId: string, leaseMs: number): boolean {
    const h = this.held.get(requestId);
    if (!h) return false;
    clearTimeout(h.timer);
    h.expiresAt = Date.now() + leaseMs;
    h.timer = this.expireAfter(requestId, leaseMs);
    return true;
  }

  /** Reads and releases the blocks of `requestId`. */
  pull(requestId: string, engineId: unknown, blockIds: unknown): PullResult {
    const h = this.held.get(requestId);
    if (!h) {
      return {
        ok: false,
        status: 404,
        message: `no KV blocks held for request ${requestId} (unknown, already read, or lease expired)`,
      };
    }
    if (typeof engineId === 'string' && engineId !== h.payload.engine_id) {
      return {
        ok: false,
        status: 409,
        message: `remote_engine_id ${engineId} does not match engine ${h.payload.engine_id}`,
      };
    }
    if (Array.isArray(blockIds) && !sameIds(blockIds, h.payload.block_ids)) {
      return {
        ok: false,
        status: 409,
        message: `remote_block_ids do not match the blocks held for request ${requestId}`,
      };
    }
    this.drop(requestId);
    return { ok: true, payload: h.payload };
  }

  release(requestId: string): boolean {
    return this.drop(requestId);
  }

  private drop(requestId: string): boolean {
    const h = this.held.get(requestId);
    if (!h) return false;
    clearTimeout(h.timer);
    this.held.delete(requestId);
    this.blocks.free(h.payload.block_ids.length);
    return true;
  }

  list(): KvHeldEntry[] {
    return [...this.held].map(([request_id, h]) => ({
      request_id,
      kind: 'handoff_prefill' as const,
      blocks: h.payload.block_ids.length,
      expires_at_ms: h.expiresAt,
    }));
  }

  clear(): void {
    for (const id of [...this.held.keys()]) this.drop(id);
  }
}

function sameIds(a: unknown[], b: number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

interface Expectation {
  resolve: (p: KvPayload) => void;
  blocks: number;
  expiresAt: number;
}

/**
 * Decode side of the trigger flow (Mooncake layer-wise): the decode registers the blocks it
 * allocated and waits for the prefill to push KV into them, keyed by request id.
 */
export class PushInbox {
  private readonly expected = new Map<string, Expectation>();

  /** Resolves with the pushed payload; rejects on abort (the caller bounds the wait with `signal`). */
  expect(requestId: string, blocks: number, waitMs: number, signal: AbortSignal): Promise<KvPayload> {
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        if (this.expected.get(requestId) === exp) this.expected.delete(requestId);
        reject(new AbortedError(String(signal.reason ?? 'aborted')));
      };
      const exp: Expectation = {
        blocks,
        expiresAt: Date.now() + waitMs,
        resolve: (p) => {
          signal.removeEventListener('abort', onAbort);
          resolve(p);
        },
      };
      this.expected.set(requestId, exp);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** A push arrived: true when a decode was waiting for it. */
  deliver(requestId: string, payload: KvPayload): boolean {
    const exp = this.expected.get(requestId);
    if (!exp) return false;
    this.expected.delete(requestId);
    exp.resolve(payload);
    return true;
  }

  cancel(requestId: string): void {
    this.expected.delete(requestId);
  }

  list(): KvHeldEntry[] {
    return [...this.expected].map(([request_id, e]) => ({
      request_id,
      kind: 'trigger_decode' as const,
      blocks: e.blocks,
      expires_at_ms: e.expiresAt,
    }));
  }
}
