import type { IncomingHttpHeaders } from 'node:http';
import { Agent, Pool, type Dispatcher } from 'undici';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
]);

/** Request headers worth forwarding to the engine (end-to-end ones, no hop-by-hop). */
export function forwardableRequestHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(key)) continue;
    out[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** Engine response headers worth relaying to the client. */
export function forwardableResponseHeaders(
  headers: Record<string, string | string[] | undefined>,
  dropLength: boolean,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(key)) continue;
    if (!dropLength && key === 'content-length') continue;
    out[key] = value;
  }
  return out;
}

export interface UpstreamRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  signal?: AbortSignal;
  /** Overrides the client's default headers/body timeout (ms). */
  timeoutMs?: number;
}

/**
 * The engine behind this proxy: one undici Pool with keep-alive. Aborting a request's signal destroys
 * its socket, which is how vLLM notices a gone client and aborts the engine request.
 */
export class EngineClient {
  readonly origin: string;
  private readonly pool: Pool;

  constructor(
    engineUrl: string,
    connections: number,
    private readonly timeoutMs: number,
  ) {
    this.origin = new URL(engineUrl).origin;
    this.pool = new Pool(this.origin, { connections, keepAliveTimeout: 30_000, pipelining: 1 });
  }

  request(req: UpstreamRequest): Promise<Dispatcher.ResponseData> {
    const timeout = req.timeoutMs ?? this.timeoutMs;
    return this.pool.request({
      method: req.method,
      path: req.path,
      headers: req.headers,
      body: req.body ?? null,
      signal: req.signal ?? null,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}

/** Calls to peer proxies (stops, info); each call is bounded by `timeoutMs`. */
export class PeerClient {
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });

  constructor(private readonly timeoutMs: number) {}

  async call(
    origin: string,
    method: 'GET' | 'POST',
    path: string,
    body?: string,
  ): Promise<{ status: number; json: unknown }> {
    const res = await this.agent.request({
      origin,
      path,
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body ?? null,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.body.text();
    let json: unknown = null;
    try {
      json = text.length > 0 ? JSON.parse(text) : null;
    } catch {
      json = text;
    }
    return { status: res.statusCode, json };
  }

  close(): Promise<void> {
    return this.agent.destroy();
  }
}
