import { checkJsonShape } from '../../../common/json-shape.js';
import { jsonSource } from '../../../common/json-splice.js';
import { once } from 'node:events';
import {
  createServer,
  request as httpRequest,
  type ClientRequest as HttpClientRequest,
  type IncomingMessage,
  type Server,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import type { Dispatcher as UndiciDispatcher } from 'undici';
import { createLogger } from '../../../common/logger.js';
import { validateCoordinatorConfig } from '../../../config/coordinator-config.js';
import type { MetaserverKvFields } from '../../../engine-adapters/index.js';
import type { DispatchObserver, RequestObserver } from '../../../observability/dispatch-observer.js';
import type { ClientRequest } from '../../internal-request/client-request.js';
import { StaticInstanceSource, type Instance } from '../../fleet/instance-source.js';
import { SchedulingAdapter } from '../../scheduling-bridge/scheduling-adapter.js';
import type { UpstreamRequest, Upstreams } from '../../fleet/upstream.js';
import { Dispatcher } from '../attempt/dispatcher.js';
import { RequestCancellation } from '../request/request-cancellation.js';
import { OpenAiPassThroughSink } from '../request/openai-pass-through-sink.js';
import { TakeOnceStore } from '../../../common/take-once-store.js';
import { triggerKey, type PendingTrigger } from '../flows/pending-trigger.js';

/**
 * Test harness for the dispatch flows, in process: the Dispatcher over scripted fake engines (no
 * engine sockets), the client side on a loopback HTTP server. Used by the dispatch unit tests.
 */

/** One leg as a fake engine received it. */
/** Where the fake engines are told the coordinator is (direct trigger: its metaserver). */
const PUBLIC_URL = 'http://coordinator.test';

export interface LegCall {
  instanceId: string;
  path: string;
  body: Record<string, unknown>;
  headers: Record<string, string>;
  /** The envelope's role (proxy mode) or the leg's position (direct mode has no envelope). */
  role: string | undefined;
  /** Set when the coordinator aborted the leg (closed its connection). */
  aborted: boolean;
  /** What the engine script answered. */
  reply: Promise<EngineReply>;
}

/** What a fake engine does with one leg. */
export type EngineReply =
  | { kind: 'json'; status?: number; body: unknown; contentType?: string }
  /** Frames as `data: …` payloads; `end`: `done` adds `[DONE]`, `truncate` just ends, `error` resets, `hang` stays open. */
  | { kind: 'sse'; frames: readonly string[]; end?: 'done' | 'truncate' | 'error' | 'hang'; gapMs?: number }
  | { kind: 'refuse' }
  | { kind: 'hang' };

export type EngineScript = (call: LegCall, harness: DispatchHarness) => EngineReply | Promise<EngineReply>;

export interface ObservedEvent {
  event: 'attemptFailed' | 'retry' | 'stopResult' | 'end' | 'prefillKvSkipped' | 'migration';
  args: unknown[];
}

export interface ClientReply {
  status: number;
  headers: IncomingMessage['headers'];
  text: string;
}

type ResponseData = UndiciDispatcher.ResponseData;

export class DispatchHarness {
  readonly calls: LegCall[] = [];
  /** Stop and abort calls (`postJson`): instance, path and parsed body. */
  readonly stops: Array<{ instanceId: string; path: string; body: Record<string, unknown> }> = [];
  readonly events: ObservedEvent[] = [];
  readonly triggers = new TakeOnceStore<PendingTrigger>();
  readonly source: StaticInstanceSource;
  readonly scheduling: SchedulingAdapter;
  readonly dispatcher: Dispatcher;
  private server: Server | null = null;
  private url = '';
  private listening: Promise<string> | null = null;
  private served: Promise<void> = Promise.resolve();
  private readonly waiters: Array<() => void> = [];

  constructor(
    config: Record<string, unknown>,
    private readonly engines: Record<string, EngineScript>,
  ) {
    const resolved = validateCoordinatorConfig({
      ...config,
      // the fake engines' hosts are not loopback: tell them a public URL, as a real deployment must
      server: { publicUrl: PUBLIC_URL, ...(config.server as object) },
      retry: { baseDelayMs: 1, maxDelayMs: 2, ...(config.retry as object) },
      scheduling: { seed: 1, ...(config.scheduling as object) },
      // scripted engines answer non-stream legs with JSON: streamed legs only where a test asks
      migration: { nonStreamLegs: 'json', ...(config.migration as object) },
    });
    this.source = new StaticInstanceSource(resolved.instances);
    const upstreams = this.fakeUpstreams() as Upstreams;
    const log = createLogger('dispatch-test', 'silent');
    this.scheduling = new SchedulingAdapter(resolved.scheduling, { source: this.source, upstreams, log });
    this.dispatcher = new Dispatcher({
      config: resolved,
      source: this.source,
      scheduling: this.scheduling,
      upstreams,
      triggers: this.triggers,
      log,
      observer: this.observer(),
      publicUrl: () => PUBLIC_URL,
    });
  }

  /** Legs received by one instance. */
  callsTo(instanceId: string): LegCall[] {
    return this.calls.filter((c) => c.instanceId === instanceId);
  }

  /** Resolves once `instanceId` has received `n` legs. */
  async received(instanceId: string, n = 1): Promise<void> {
    while (this.callsTo(instanceId).length < n) await new Promise<void>((r) => this.waiters.push(r));
  }

  /**
   * Direct trigger: what the decode engine's connector does (posts to its leg's metaserver URL), the
   * gateway's `/v1/metaserver/:token` part.
   */
  async callMetaserver(call: LegCall): Promise<{ status: number; body: unknown }> {
    const url = (call.body.kv_transfer_params as { metaserver?: string } | undefined)?.metaserver;
    const key = triggerKey(url?.slice(`${PUBLIC_URL}/v1/metaserver/`.length));
    const entry = key === null ? undefined : this.triggers.take(key);
    if (entry === undefined) return { status: 404, body: null };
    return entry.run(kvFields(call.headers['x-request-id']!));
  }

  /** Opens one chat request (the client body plus `model`/`messages` defaults) on the loopback server. */
  private async post(body: Record<string, unknown>): Promise<HttpClientRequest> {
    const url = await this.listen();
    const payload = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...body });
    const req = httpRequest(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => {});
    req.end(payload);
    return req;
  }

  /**
   * Sends one chat request through a loopback server into `Dispatcher.serve`, and resolves when the
   * dispatcher is done with it. `disconnect`: the client goes away once that instance got its leg.
   */
  async send(body: Record<string, unknown>, disconnect?: string): Promise<ClientReply | null> {
    const req = await this.post(body);
    if (disconnect !== undefined) {
      await this.received(disconnect);
      req.destroy();
      await new Promise((r) => setImmediate(r)); // let the server see the close
      await this.served;
      return null;
    }
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    let text = '';
    res.setEncoding('utf8');
    for await (const chunk of res) text += chunk as string;
    await this.served;
    return { status: res.statusCode ?? 0, headers: res.headers, text };
  }

  /**
   * A stream client that stops reading: it pauses the response as soon as the status line arrives (its
   * socket fills, the relay pauses the engine) and reads on after `resumeAfterMs`, or once the
   * dispatcher is done with the request. `complete`: the response ended normally (not cut).
   */
  async sendSlowReader(
    body: Record<string, unknown>,
    resumeAfterMs?: number,
  ): Promise<ClientReply & { complete: boolean }> {
    const req = await this.post(body);
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    res.pause();
    const served = this.served;
    await (resumeAfterMs === undefined ? served : new Promise((r) => setTimeout(r, resumeAfterMs)));
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
    const complete = new Promise<boolean>((resolve) => {
      res.on('end', () => resolve(res.complete));
      res.on('error', () => resolve(false));
      res.on('close', () => resolve(res.complete));
    });
    res.resume();
    const result = { status: res.statusCode ?? 0, headers: res.headers, complete: await complete };
    await served;
    return { ...result, text };
  }

  /** Events the observer saw, by name. */
  observed(event: ObservedEvent['event']): unknown[][] {
    return this.events.filter((e) => e.event === event).map((e) => e.args);
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise((r) => this.server!.close(r));
  }

  /** Concurrent sends share one listen (the first one's). */
  private listen(): Promise<string> {
    this.listening ??= this.startServer();
    return this.listening;
  }

  private async startServer(): Promise<string> {
    this.server = createServer((req, res) => {
      let served!: () => void;
      this.served = new Promise((r) => (served = r));
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const bytes = Buffer.concat(chunks);
        const members: number[] = [];
        checkJsonShape(bytes, { maxDepth: Infinity, maxKeys: Infinity }, members);
        const body = JSON.parse(bytes.toString()) as Record<string, unknown>;
        // (the gateway validated it; dispatch does not import the gateway) Legs are spliced from its
        // bytes, as behind the gateway (json-splice.ts)
        const client: ClientRequest = {
          source: jsonSource(bytes, members, body),
          kind: 'chat',
          body,
          model: String(body.model),
          stream: body.stream === true,
          wantsTokenIds: body.return_token_ids === true,
        };
        const cancellation = new RequestCancellation(res);
        const sink = new OpenAiPassThroughSink(res, 'req-t', client.stream);
        void this.dispatcher
          .serve(client, 'req-t', '/v1/chat/completions', res, sink, {}, cancellation)
          .finally(served);
      });
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  private observer(): DispatchObserver {
    const record =
      (event: ObservedEvent['event']) =>
      (...args: unknown[]): void => {
        this.events.push({ event, args });
      };
    const request: RequestObserver = {
      attempt() {},
      legStart: () => ({ firstByte() {}, end() {} }),
      chunk() {},
      committed() {},
      attemptFailed: record('attemptFailed'),
      retry: record('retry'),
      prefillKvSkipped: record('prefillKvSkipped'),
      stopResult: record('stopResult'),
      migration: record('migration'),
      end: record('end'),
    };
    return { requestStart: () => request };
  }

  private fakeUpstreams(): Pick<Upstreams, 'request' | 'postJson'> {
    return {
      request: (instance, req) => this.leg(instance as Instance, req),
      postJson: async (instance, path, body) => {
        this.stops.push({ instanceId: (instance as Instance).id, path, body: JSON.parse(body) });
        return { status: 200, text: '{"state":"stopped"}' };
      },
    };
  }

  /** One upstream request: the engine script decides; an abort closes it like undici does. */
  private leg(instance: Instance, req: UpstreamRequest): Promise<ResponseData> {
    const sent = req.body ?? '{}';
    const text = typeof sent === 'string' || Buffer.isBuffer(sent) ? sent : Buffer.concat(sent);
    const body = JSON.parse(text.toString()) as Record<string, unknown>;
    const envelope = body._motor_dispatch as { role?: string } | undefined;
    const call: LegCall = {
      instanceId: instance.id,
      path: req.path,
      body,
      headers: req.headers ?? {},
      role: envelope?.role,
      aborted: false,
      reply: Promise.resolve({ kind: 'hang' }),
    };
    call.reply = Promise.resolve().then(() => this.engines[instance.id]!(call, this));
    this.calls.push(call);
    for (const wake of this.waiters.splice(0)) wake();
    const signal = req.signal as unknown as { once(e: 'abort', f: () => void): void };
    return new Promise<ResponseData>((resolve, reject) => {
      let stream: PassThrough | null = null;
      signal.once('abort', () => {
        call.aborted = true;
        const err = Object.assign(new Error('This operation was aborted'), { code: 'UND_ERR_ABORTED' });
        if (stream)
          stream.on('error', () => {}).destroy(err); // as undici does
        else reject(err);
      });
      void call.reply.then((reply) => {
        if (call.aborted || reply.kind === 'hang') return;
        if (reply.kind === 'refuse') {
          reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
          return;
        }
        stream = new PassThrough();
        const status = reply.kind === 'json' ? (reply.status ?? 200) : 200;
        const contentType =
          reply.kind === 'json' ? (reply.contentType ?? 'application/json') : 'text/event-stream';
        resolve({ statusCode: status, headers: { 'content-type': contentType }, body: stream } as never);
        void play(stream, reply);
      });
    });
  }
}

async function play(stream: PassThrough, reply: Exclude<EngineReply, { kind: 'refuse' | 'hang' }>) {
  await new Promise((r) => setImmediate(r)); // the coordinator attaches its listeners first
  if (reply.kind === 'json') {
    stream.end(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    return;
  }
  for (const frame of reply.frames) {
    if (stream.destroyed) return;
    // A fast engine that honours backpressure: it waits while the coordinator has paused its stream.
    if (!stream.write(`data: ${frame}\n\n`)) await drainedOrClosed(stream);
    await new Promise((r) => setTimeout(r, reply.gapMs ?? 0));
  }
  if (stream.destroyed) return;
  const end = reply.end ?? 'done';
  if (end === 'done') stream.end('data: [DONE]\n\n');
  else if (end === 'truncate') stream.end();
  else if (end === 'error')
    stream.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
}

function drainedOrClosed(stream: PassThrough): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('drain', done).off('close', done);
      resolve();
    };
    stream.once('drain', done).once('close', done);
  });
}

function kvFields(requestId: string): MetaserverKvFields {
  return {
    request_id: requestId,
    do_remote_decode: true,
    remote_block_ids: [1, 2],
    remote_block_size: 16,
    remote_engine_id: 'decode-engine',
    remote_host: '10.0.0.2',
    remote_port: 7000,
    remote_cached_tokens: 0,
  };
}
