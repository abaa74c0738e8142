import type { IncomingHttpHeaders } from 'node:http';
import { parseJsonPreservingRoom } from './request-body.js';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON (bootstrap_room kept exact, as a string when beyond 2^53), raw text if not JSON, null if empty. */
  body: unknown;
  received_at_ms: number;
}

interface Raw {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  text: string;
  at: number;
}

/** Bounded ring buffer of received requests; bodies are kept as text and parsed only when read. */
export class Recorder {
  private ring: Raw[] = [];
  private next = 0;

  constructor(private readonly max: number) {}

  record(method: string, path: string, headers: IncomingHttpHeaders, text: string): void {
    if (this.max <= 0) return;
    const r: Raw = { method, path, headers, text, at: Date.now() };
    if (this.ring.length < this.max) this.ring.push(r);
    else this.ring[this.next] = r;
    this.next = (this.next + 1) % this.max;
  }

  list(): RecordedRequest[] {
    const ordered =
      this.ring.length < this.max
        ? this.ring
        : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
    return ordered.map((r) => {
      let body: unknown = null;
      if (r.text.length > 0) {
        const parsed = parseJsonPreservingRoom(r.text);
        body = parsed.ok ? parsed.value : r.text;
        // A body nested too deeply to re-serialise (stack overflow) is listed as its raw text.
        if (parsed.ok && typeof body === 'object' && body !== null) {
          try {
            JSON.stringify(body);
          } catch {
            body = r.text;
          }
        }
      }
      return { method: r.method, path: r.path, headers: r.headers, body, received_at_ms: r.at };
    });
  }

  clear(): void {
    this.ring = [];
    this.next = 0;
  }
}
