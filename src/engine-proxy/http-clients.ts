import type { IncomingHttpHeaders } from 'node:http';
import { Agent, Pool, type Dispatcher } from 'undici';
import { PEER_SECRET_HEADER } from '../common/peer-secrets.js';
import { undiciBody, type RequestBody } from '../common/request-body.js';

/** Never forwarded either way: hop-by-hop headers, and the peer secret (it is for this proxy alone). */
const HOP_BY_HOP = new Set([
  PEER_SECRET_HEADER,
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

/** `path` appended to a peer base URL's own path (a peer may live under a prefix). */
export function peerPath(baseUrl: string, path: string): string {
  return new URL(baseUrl).pathname.replace(/\/+$/, '') + path;
}

export interface UpstreamRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** A leg spliced from the envelope's bytes is the list of its buffers (json-splice.ts). */
  body?: RequestBody;
  signal?: AbortSignal;
  /** Overrides the client's default headers/body timeout (ms). */
  timeoutMs?: number;
  /** An admin-optional engine route (SGLang `/abort_request`): sent with the engine admin key. */
  admin?: boolean;
}

/** The body of an engine answer: streamed chunk by chunk or read whole (undici's body satisfies it). */
export interface EngineResponseBody extends AsyncIterable<Buffer> {
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
  dump(): Promise<void>;
}

export interface EngineResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: EngineResponseBody;
}

/** How the proxy reaches its engine; tests inject a fake (fake-clients.ts). */
export interface EngineTransport {
  /** Rejects when the engine is unreachable, the signal aborts, or a timeout fires. */
  request(req: UpstreamRequest): Promise<EngineResponse>;
  close(): Promise<void>;
}

/** An answer from a peer proxy: its status and its body parsed as JSON (the text when not JSON). */
export interface PeerReply {
  status: number;
  json: unknown;
}

/** How the proxy calls peer proxies (stops, bootstrap discovery); tests inject a fake. */
export interface PeerTransport {
  /** `headers`: extra request headers (the peer secret on a stop). */
  call(
    origin: string,
    method: 'GET' | 'POST',
    path: string,
    body?: string,
    headers?: Readonly<Record<string, string>>,
  ): Promise<PeerReply>;
  close(): Promise<void>;
}

/**
 * The engine behind this proxy: one undici Pool with keep-alive. Aborting a request's signal destroys
 * its socket, which is how vLLM notices a gone client and aborts the engine request.
 */
export class EngineClient implements EngineTransport {
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

  request(req: UpstreamRequest): Promise<EngineResponse> {
    const timeout = req.timeoutMs ?? this.timeoutMs;
    const { body, headers } =
      req.body === undefined ? { body: null, headers: req.headers } : undiciBody(req.body, req.headers);
    return this.pool.request({
      method: req.method,
      path: req.path,
      headers,
      // undici writes an iterable chunk by chunk under the given content-length (Dispatcher.md `body`)
      body: body as Dispatcher.DispatchOptions['body'],
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
export class PeerClient implements PeerTransport {
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });

  constructor(private readonly timeoutMs: number) {}

  async call(
    origin: string,
    method: 'GET' | 'POST',
    path: string,
    body?: string,
    headers?: Readonly<Record<string, string>>,
  ): Promise<PeerReply> {
    const res = await this.agent.request({
      origin,
      path,
      method,
      headers: body === undefined ? { ...headers } : { 'content-type': 'application/json', ...headers },
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
