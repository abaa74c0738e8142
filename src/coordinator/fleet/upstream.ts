import { EventEmitter } from 'node:events';
import { Pool, type Dispatcher } from 'undici';
import type { EngineCredentials } from '../../config/engine-credentials.js';
import { undiciBody, type RequestBody } from '../../common/request-body.js';
import type { Instance } from './instance-source.js';

export { bodyLength } from '../../common/request-body.js';

export interface UpstreamOptions {
  connectionsPerInstance: number;
  keepAliveMs: number;
  connectMs: number;
  /** Direct-mode engine keys by instance id (config `apiKey` / `adminApiKey`). */
  credentials?: ReadonlyMap<string, EngineCredentials>;
}

/** A request body (request-body.ts: a spliced leg is the list of its buffers). */
export type UpstreamBody = RequestBody;

export interface UpstreamRequest {
  method?: 'POST' | 'GET';
  path: string;
  body?: UpstreamBody;
  headers?: Record<string, string>;
  signal?: AbortSignal | UpstreamAbort;
  /** An admin-optional engine route (SGLang `/abort_request`): the instance's admin key, else its api key. */
  admin?: boolean;
}

/**
 * Aborts one upstream request. undici accepts an EventEmitter with `aborted` as its signal; an
 * AbortSignal costs a request ~6 µs more (EventTarget listener add and remove), on every leg.
 */
export class UpstreamAbort extends EventEmitter {
  aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }
}

/**
 * One undici `Pool` per instance origin (DESIGN.md §7: ~3× `fetch`). Body and header timeouts are
 * off: the dispatcher's own watchdogs decide, and abort through `signal`, which destroys the socket.
 */
export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, { origin: string; base: string }>();

  constructor(private readonly opts: UpstreamOptions) {}

  /** Origin and path prefix of an instance URL, parsed once per URL (not per request). */
  private target(url: string): { origin: string; base: string } {
    let t = this.targets.get(url);
    if (!t) {
      const u = new URL(url);
      t = { origin: u.origin, base: u.pathname.replace(/\/+$/, '') };
      if (this.targets.size >= 4096) this.targets.clear(); // bounded under registry churn
      this.targets.set(url, t);
    }
    return t;
  }

  private poolFor(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.opts.connectionsPerInstance,
        keepAliveTimeout: this.opts.keepAliveMs,
        headersTimeout: 0,
        bodyTimeout: 0,
        connect: { timeout: this.opts.connectMs },
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  request(instance: Pick<Instance, 'id' | 'url'>, req: UpstreamRequest): Promise<Dispatcher.ResponseData> {
    const { origin, base } = this.target(instance.url);
    let headers =
      req.body !== undefined ? { 'content-type': 'application/json', ...req.headers } : req.headers;
    let body: string | Buffer | Iterable<Buffer> | undefined;
    if (req.body !== undefined) ({ body, headers } = undiciBody(req.body, headers ?? {}));
    const keys = this.opts.credentials?.get(instance.id);
    if (keys) {
      // One key on every call satisfies both engines: vLLM guards /v1*, SGLang all but /health*,
      // /ready*, /metrics* (fixtures README facts 21-22; engine-proxy/engine-credentials.ts).
      const key = req.admin ? (keys.adminApiKey ?? keys.apiKey) : keys.apiKey;
      if (key !== null) headers = { ...headers, authorization: `Bearer ${key}` };
    }
    return this.poolFor(origin).request({
      method: req.method ?? 'POST',
      path: base + req.path,
      headers,
      // undici writes an iterable chunk by chunk under the given content-length (Dispatcher.md `body`)
      body: body as Dispatcher.DispatchOptions['body'],
      signal: req.signal,
    });
  }

  /** A small JSON call with its own timeout (stops, aborts); never throws. */
  async postJson(
    instance: Pick<Instance, 'id' | 'url'>,
    path: string,
    body: string,
    timeoutMs: number,
    opts: { headers?: Record<string, string>; admin?: boolean } = {},
  ): Promise<{ status: number; text: string } | { error: string }> {
    const signal = AbortSignal.timeout(Math.max(1, timeoutMs));
    try {
      const res = await this.request(instance, {
        path,
        body,
        headers: opts.headers ?? {},
        signal,
        admin: opts.admin ?? false,
      });
      return { status: res.statusCode, text: await res.body.text() };
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  /**
   * Closes the pool of an origin nobody uses any more (an instance removed from the registry):
   * requests already running on it finish first. A later request to that origin opens a new pool.
   */
  async release(url: string): Promise<void> {
    const origin = new URL(url).origin;
    const pool = this.pools.get(origin);
    if (!pool) return;
    this.pools.delete(origin);
    await pool.close();
  }

  /** Number of open pools (one per origin in use). */
  get poolCount(): number {
    return this.pools.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy()));
    this.pools.clear();
  }
}

/** Reads a whole response body as a Buffer (events, not `for await`: no async iterator per body). */
export function readAll(body: Dispatcher.ResponseData['body']): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (body.destroyed) return reject(body.errored ?? new Error('response body destroyed before reading'));
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer) => chunks.push(chunk));
    body.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    body.once('error', reject);
    // destroyed without an error (an aborted leg): never leave the caller waiting
    body.once('close', () => reject(new Error('response body closed before its end')));
  });
}
