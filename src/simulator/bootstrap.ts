import { AbortedError } from './timing.js';
import type { KvHeldEntry, KvPayload } from './kv-handoff.js';

interface PrefillRoom {
  requestId: string;
  payload: KvPayload;
  expiresAt: number;
  timer: NodeJS.Timeout;
  joined: () => void;
  failed: (err: Error) => void;
}

interface Joiner {
  resolve: (p: KvPayload) => void;
  timer: NodeJS.Timeout;
}

/**
 * SGLang-style bootstrap rendezvous, served by the prefill simulator on its HTTP port.
 *
 * The prefill computes, then `offer`s its KV for a room and waits (bounded) for a decode to join.
 * The decode calls `POST /internal/bootstrap/join` on bootstrap_host:bootstrap_port, which waits
 * (bounded) for a prefill offering that room. Either may come first; rooms compare as decimal strings.
 */
export class BootstrapRooms {
  private readonly rooms = new Map<string, PrefillRoom>();
  private readonly joiners = new Map<string, Joiner[]>();

  /** Prefill side: resolves when a decode joined the room; rejects on timeout or abort. */
  offer(
    room: string,
    requestId: string,
    payload: KvPayload,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const waiting = this.joiners.get(room);
      if (waiting && waiting.length > 0) {
        const j = waiting.shift()!;
        if (waiting.length === 0) this.joiners.delete(room);
        clearTimeout(j.timer);
        j.resolve(payload);
        resolve();
        return;
      }
      const cleanup = (): void => {
        clearTimeout(r.timer);
        signal.removeEventListener('abort', onAbort);
        if (this.rooms.get(room) === r) this.rooms.delete(room);
      };
      const onAbort = (): void => {
        cleanup();
        reject(new AbortedError(String(signal.reason ?? 'aborted')));
      };
      const r: PrefillRoom = {
        requestId,
        payload,
        expiresAt: Date.now() + timeoutMs,
        timer: setTimeout(() => {
          cleanup();
          reject(new Error(`bootstrap timeout: no decode joined room ${room} within ${timeoutMs} ms`));
        }, timeoutMs),
        joined: () => {
          cleanup();
          resolve();
        },
        failed: (err) => {
          cleanup();
          reject(err);
        },
      };
      const previous = this.rooms.get(room);
      if (previous)
        previous.failed(new Error(`bootstrap room ${room} was taken over by another prefill request`));
      this.rooms.set(room, r);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Decode side (on the prefill's server): resolves with the room's KV, or null after `timeoutMs`. */
  join(room: string, timeoutMs: number, cancel: AbortSignal): Promise<KvPayload | null> {
    const r = this.rooms.get(room);
    if (r) {
      r.joined();
      return Promise.resolve(r.payload);
    }
    return new Promise((resolve) => {
      const j: Joiner = {
        resolve: (p) => {
          cancel.removeEventListener('abort', drop);
          resolve(p);
        },
        timer: setTimeout(() => {
          drop();
          resolve(null);
        }, timeoutMs),
      };
      const drop = (): void => {
        clearTimeout(j.timer);
        const list = this.joiners.get(room);
        if (!list) return;
        const i = list.indexOf(j);
        if (i >= 0) list.splice(i, 1);
        if (list.length === 0) this.joiners.delete(room);
      };
      cancel.addEventListener(
        'abort',
        () => {
          drop();
          resolve(null);
        },
        { once: true },
      );
      const list = this.joiners.get(room);
      if (list) list.push(j);
      else this.joiners.set(room, [j]);
    });
  }

  list(): KvHeldEntry[] {
    return [...this.rooms.values()].map((r) => ({
      request_id: r.requestId,
      kind: 'bootstrap_prefill' as const,
      blocks: r.payload.block_ids.length,
      expires_at_ms: r.expiresAt,
    }));
  }
}
