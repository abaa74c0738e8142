import type {
  EngineResponse,
  EngineResponseBody,
  EngineTransport,
  PeerReply,
  PeerTransport,
  UpstreamRequest,
} from '../http-clients.js';

/** In-process stand-ins for the engine and peer clients, for the proxy's unit tests. */

/** How a fake engine answers one request (it may throw to play "unreachable"). */
export type EngineScript = (req: UpstreamRequest) => EngineResponse | Promise<EngineResponse>;

/** What the body does after its chunks: end, fail (connection lost), or wait for the request's abort. */
export type BodyEnd = 'end' | 'fail' | 'hang';

/** An engine answer from chunks; `hang` and the request signal model a stop while streaming. */
export function engineReply(
  status: number,
  body: string | Record<string, unknown> | string[],
  opts: { headers?: Record<string, string>; end?: BodyEnd; signal?: AbortSignal } = {},
): EngineResponse {
  const chunks = (Array.isArray(body) ? body : [typeof body === 'string' ? body : JSON.stringify(body)]).map(
    (c) => Buffer.from(c),
  );
  return {
    statusCode: status,
    headers: opts.headers ?? { 'content-type': 'application/json' },
    body: fakeBody(chunks, opts.end ?? 'end', opts.signal),
  };
}

/** An SSE answer: each event becomes one `data:` chunk, then `[DONE]`. */
export function sseReply(
  events: unknown[],
  opts: { end?: BodyEnd; signal?: AbortSignal } = {},
): EngineResponse {
  const chunks = events.map((e) => `data: ${JSON.stringify(e)}\n\n`);
  if ((opts.end ?? 'end') === 'end') chunks.push('data: [DONE]\n\n');
  return engineReply(200, chunks, { ...opts, headers: { 'content-type': 'text/event-stream' } });
}

/** Rejects like undici does when the request's signal aborts (a stop or a gone client). */
export function hangUntilAborted(req: UpstreamRequest): Promise<never> {
  return new Promise((_, reject) => {
    const fail = (): void => reject(new Error('This operation was aborted'));
    if (req.signal?.aborted) fail();
    else req.signal?.addEventListener('abort', fail, { once: true });
  });
}

/** Plays "engine unreachable" as undici reports it. */
export function unreachable(): never {
  throw new Error('connect ECONNREFUSED 10.0.0.5:30000');
}

function fakeBody(chunks: Buffer[], end: BodyEnd, signal: AbortSignal | undefined): EngineResponseBody {
  async function* iterate(): AsyncGenerator<Buffer> {
    for (const chunk of chunks) yield chunk;
    if (end === 'fail') throw new Error('other side closed');
    if (end === 'hang') await hangUntilAborted({ method: 'POST', path: '', headers: {}, signal });
  }
  const whole = async (): Promise<Buffer> => {
    const parts: Buffer[] = [];
    for await (const chunk of iterate()) parts.push(chunk);
    return Buffer.concat(parts);
  };
  return {
    [Symbol.asyncIterator]: iterate,
    text: async () => (await whole()).toString('utf8'),
    arrayBuffer: async () => {
      const buf = await whole();
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
    },
    dump: async () => undefined,
  };
}

/**
 * A script that answers SGLang's `GET /server_info` like a prefill with `port` as its
 * `disaggregation_bootstrap_port` (fixture sglang/server/server-info.json) and leaves the rest to `script`.
 */
export function withSglangServerInfo(script: EngineScript, port = 8998): EngineScript {
  return (req) =>
    req.path === '/server_info'
      ? engineReply(200, { disaggregation_mode: 'prefill', disaggregation_bootstrap_port: port })
      : script(req);
}

/** Records every request and answers from its script; `received(n)` resolves once n arrived. */
export class FakeEngineClient implements EngineTransport {
  readonly requests: UpstreamRequest[] = [];
  private waiters: Array<() => void> = [];

  constructor(public script: EngineScript) {}

  async request(sent: UpstreamRequest): Promise<EngineResponse> {
    // a spliced body is a list of buffers: recorded as the one body the engine would read
    const req = Array.isArray(sent.body) ? { ...sent, body: Buffer.concat(sent.body) } : sent;
    this.requests.push(req);
    for (const wake of this.waiters.splice(0)) wake();
    return this.script(req);
  }

  /** The requests to one path (e.g. the generation requests, without SGLang's abort calls). */
  to(path: string): UpstreamRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  received(n: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.requests.length >= n) resolve();
        else this.waiters.push(check);
      };
      check();
    });
  }

  async close(): Promise<void> {}
}

export interface PeerCall {
  origin: string;
  method: 'GET' | 'POST';
  path: string;
  body: unknown;
  /** Extra headers sent (absent when none). */
  headers?: Record<string, string>;
}

/** How a fake peer answers (it may throw to play "unreachable"). */
export type PeerScript = (call: PeerCall) => PeerReply | Promise<PeerReply>;

/** Records every peer call (the body parsed from JSON) and answers from its script. */
export class FakePeerClient implements PeerTransport {
  readonly calls: PeerCall[] = [];

  constructor(
    public script: PeerScript = () => ({ status: 200, json: { accepted: true, state: 'not_found' } }),
  ) {}

  async call(
    origin: string,
    method: 'GET' | 'POST',
    path: string,
    body?: string,
    headers?: Readonly<Record<string, string>>,
  ): Promise<PeerReply> {
    const call: PeerCall = {
      origin,
      method,
      path,
      body: body === undefined ? undefined : JSON.parse(body),
      ...(headers !== undefined ? { headers: { ...headers } } : {}),
    };
    this.calls.push(call);
    return this.script(call);
  }

  async close(): Promise<void> {}
}
