import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BodyReader } from '../../common/body-reader.js';
import { listen, closeServer } from '../../common/http.js';
import { http } from '../../simulator/testing/index.js';

/** Helpers for the engine-proxy process tests (test/engine-proxy*.test.ts). */

const dir = mkdtempSync(join(tmpdir(), 'motor-engine-proxy-'));

/** Writes a vLLM engine config with this kv_connector (or any JSON) to a temp file. */
export function engineConfigFile(name: string, config: unknown): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(config));
  return file;
}

export interface EnvelopeIds {
  root: string;
  pair?: string;
  attempt?: number;
  prefillUrl?: string | null;
  decodeUrl?: string | null;
}

export function envelope(role: string, mode: string, ids: EnvelopeIds): Record<string, unknown> {
  const attempt = ids.attempt ?? 1;
  const ep = (url: string | null | undefined, id: number) =>
    url ? { instance_id: id, endpoint_id: 0, url } : null;
  return {
    root_request_id: ids.root,
    engine_request_id: `${ids.root}#a${attempt}`,
    pair_id: ids.pair ?? `pair-${ids.root}`,
    attempt_seq: attempt,
    role,
    dispatch_mode: mode,
    endpoints: { prefill: ep(ids.prefillUrl, 1), decode: ep(ids.decodeUrl, 2) },
  };
}

export interface Recorded {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** What a simulator received (its `/debug/recorded`), optionally only requests with this id. */
export async function recorded(simUrl: string, requestId?: string): Promise<Recorded[]> {
  const all = (await http(simUrl, 'GET', '/debug/recorded')).json as Recorded[];
  if (requestId === undefined) return all;
  return all.filter((r) => r.headers['x-request-id'] === requestId || r.body?.rid === requestId);
}

/** Polls `probe` (every 5 ms, up to `timeoutMs`) until it returns a truthy value. */
export async function until<T>(
  probe: () => Promise<T>,
  what: string,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface RecordingServer {
  url: string;
  requests: Array<{ method: string; path: string; body: unknown }>;
  /** Resolves once `n` requests arrived. */
  received(n: number): Promise<void>;
  close(): Promise<void>;
}

/** A stand-in peer that records what it gets and answers a stop response. */
export async function recordingServer(): Promise<RecordingServer> {
  const requests: RecordingServer['requests'] = [];
  let waiters: Array<() => void> = [];
  const server = createServer((req, res) => {
    void new BodyReader({ maxBytes: 1 << 20 }).raw(req).then((buf) => {
      let body: unknown = buf.toString();
      try {
        body = JSON.parse(buf.toString());
      } catch {
        // keep text
      }
      requests.push({ method: req.method ?? '', path: req.url ?? '', body });
      const ws = waiters;
      waiters = [];
      for (const w of ws) w();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"accepted":true,"state":"not_found"}');
    });
  });
  const url = await listen(server, 0, '127.0.0.1');
  return {
    url,
    requests,
    received: (n) =>
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (requests.length >= n) resolve();
          else waiters.push(check);
        };
        check();
      }),
    close: () => closeServer(server),
  };
}
