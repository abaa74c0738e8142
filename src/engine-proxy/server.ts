import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { stringifyWithBigInt } from '../common/json-bigint.js';
import {
  BodyTooLargeError,
  closeServer,
  isPlainObject,
  listen,
  parseJson,
  readBody,
  sendError,
  sendJson,
} from '../common/http.js';
import { logListening, type Logger } from '../common/logger.js';
import {
  buildDispatchStopRequest,
  buildDispatchStopResponse,
  buildPrefillResult,
  describeIssue,
  MOTOR_DISPATCH_KEY,
  MOTOR_DISPATCH_SCHEMA_VERSION,
  MOTOR_PREFILL_RESULT_KEY,
  normalizedReason,
  parseDispatchStopRequest,
  parseMotorDispatch,
  parsePrefillResult,
  type MotorDispatch,
  type PrefillResult,
} from '../protocol/index.js';
import {
  engineAdapterFor,
  normalizeResponseBody,
  parseMetaserverKvFields,
  SseNormalizer,
  withoutMotorFields,
  type BootstrapAddress,
  type ClientRoute,
  type EngineAdapter,
  type EngineRequest,
  type LegKind,
  type MetaserverKvFields,
} from '../engine-adapters/index.js';
import { AttemptTracker, type AttemptHandle } from './attempt-tracker.js';
import {
  EngineClient,
  forwardableRequestHeaders,
  forwardableResponseHeaders,
  PeerClient,
} from './http-clients.js';
import { ProxyMetrics } from './metrics.js';
import type { EngineProxyOptions, ProxyRole } from './options.js';
import { PeerAllowList } from './peer-allow-list.js';
import { PreparedStore } from './prepared-store.js';

/** Fields a client could use to steer KV transfer; refused next to an envelope (any engine). */
const LEGACY_FIELDS = ['kv_transfer_params', 'bootstrap_host', 'bootstrap_port', 'bootstrap_room'] as const;

const ROLE_ACCEPTS: Readonly<Record<ProxyRole, readonly string[]>> = {
  union: ['single'],
  // A prefill instance also serves degraded single-instance dispatch (conformance 15).
  prefill: ['prefill', 'single'],
  decode: ['decode'],
};

const BOOTSTRAP_CACHE_MAX = 1024;
const BOOTSTRAP_CACHE_TTL_MS = 60_000;
const HEALTH_TIMEOUT_MS = 2_000;

interface PreparedPrefill {
  dispatch: MotorDispatch;
  body: Record<string, unknown>;
  path: string;
  handle: AttemptHandle;
}

interface Envelope {
  dispatch: MotorDispatch;
  prefillResult: PrefillResult | null;
  body: Record<string, unknown>;
  leg: LegKind;
}

type Refusal = { status: number; message: string; param: string | null; code?: string };

export interface EngineProxyServer {
  url: string;
  close(): Promise<void>;
}

/** Starts the engine proxy and logs one `listening` line once bound. */
export async function startEngineProxy(opts: EngineProxyOptions, logger: Logger): Promise<EngineProxyServer> {
  const proxy = new EngineProxy(opts, logger);
  const url = await listen(proxy.server, opts.port, opts.host);
  logListening(logger, {
    url,
    role: opts.role,
    engine: opts.engine,
    engine_url: opts.engineUrl,
    dispatch_capabilities: opts.dispatchCapabilities,
  });
  return { url, close: () => proxy.close() };
}

class EngineProxy {
  readonly server: Server;
  private readonly adapter: EngineAdapter;
  private readonly tracker: AttemptTracker;
  private readonly prepared: PreparedStore<PreparedPrefill>;
  private readonly allow: PeerAllowList;
  private readonly metrics: ProxyMetrics;
  private readonly engine: EngineClient;
  private readonly peers: PeerClient;
  private readonly selfBootstrap: BootstrapAddress;
  private readonly bootstrapCache = new Map<string, { address: BootstrapAddress; expiresAt: number }>();
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(
    private readonly opts: EngineProxyOptions,
    private readonly log: Logger,
  ) {
    this.adapter = engineAdapterFor(opts.engine);
    this.allow = new PeerAllowList(opts.peerAllow);
    this.tracker = new AttemptTracker({
      ttlMs: opts.stopTtlMs,
      maxFinished: opts.maxTrackedAttempts,
      maxActive: opts.maxActiveAttempts,
    });
    this.prepared = new PreparedStore<PreparedPrefill>(
      { ttlMs: opts.preparedTtlMs, max: opts.maxPrepared, maxWaiters: opts.maxPrepared },
      (id, entry) => {
        entry.handle.finish('stopped', 'expired');
        this.metrics.dispatches.inc({ role: 'prefill', leg: 'trigger_prefill', outcome: 'expired' });
        this.log.info({ request_id: id }, 'prepared prefill expired unconsumed');
      },
    );
    this.metrics = new ProxyMetrics({
      active: () => this.tracker.activeCount,
      tracked: () => this.tracker.finishedCount,
      prepared: () => this.prepared.size,
      waiting: () => this.prepared.waiting,
    });
    this.engine = new EngineClient(opts.engineUrl, opts.engineConnections, opts.engineTimeoutMs);
    this.peers = new PeerClient(opts.peerTimeoutMs);
    const engineUrl = new URL(opts.engineUrl);
    this.selfBootstrap = {
      host: opts.bootstrapHost ?? engineUrl.hostname.replace(/^\[|\]$/g, ''),
      port: opts.bootstrapPort ?? Number(engineUrl.port || (engineUrl.protocol === 'https:' ? 443 : 80)),
    };
    const sweepEvery = Math.max(
      10,
      Math.min(1_000, Math.floor(Math.min(opts.preparedTtlMs, opts.stopTtlMs) / 2)),
    );
    this.sweepTimer = setInterval(() => {
      this.prepared.sweep();
      this.tracker.sweep();
    }, sweepEvery);
    this.sweepTimer.unref();
    this.server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
      this.route(req, res).catch((err: unknown) => {
        this.log.error({ err }, 'engine proxy route failed');
        if (!res.headersSent) sendError(res, 500, 'internal engine proxy error');
        else res.destroy();
      });
    });
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.tracker.abortAll('shutdown');
    await closeServer(this.server);
    await Promise.allSettled([this.engine.close(), this.peers.close()]);
  }

  // ---- routing --------------------------------------------------------------------------------

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    switch (`${method} ${path}`) {
      case 'POST /v1/chat/completions':
        return this.generate(req, res, 'chat');
      case 'POST /v1/completions':
        return this.generate(req, res, 'completion');
      case 'POST /v1/dispatch/stop':
        return this.dispatchStop(req, res);
      case 'POST /v1/metaserver':
        return this.metaserver(req, res);
      case 'GET /v1/motor/info':
        return sendJson(res, 200, this.info());
      case 'GET /health':
        return this.health(res);
      case 'GET /metrics': {
        const text = await this.metrics.registry.metrics();
        res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
        return void res.end(text);
      }
      case 'GET /v1/motor/engine-metrics':
        // The engine's own Prometheus metrics (vllm:*), for the coordinator's load-aware scheduling.
        return this.passThrough(req, res, undefined, path, '/metrics');
      case 'GET /debug/state':
        return sendJson(res, 200, {
          attempts_active: this.tracker.activeCount,
          attempts_tracked: this.tracker.finishedCount,
          prepared_prefills: this.prepared.size,
          metaserver_waiting: this.prepared.waiting,
        });
      default: {
        const body = method === 'GET' || method === 'HEAD' ? undefined : await this.readOrRefuse(req, res);
        if (body === null) return;
        return this.passThrough(req, res, body, path);
      }
    }
  }

  /** The body, or null after answering 413 / when the client went away. */
  private async readOrRefuse(req: IncomingMessage, res: ServerResponse): Promise<Buffer | null> {
    try {
      return await readBody(req, this.opts.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError) {
        res.setHeader('connection', 'close');
        sendError(res, 413, err.message);
      }
      return null;
    }
  }

  private info(): Record<string, unknown> {
    return {
      object: 'motor.engine_proxy_info',
      schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
      engine: this.opts.engine,
      role: this.opts.role,
      dispatch_profile: this.opts.dispatchProfile,
      dispatch_capabilities: this.opts.dispatchCapabilities,
      accepts_roles: ROLE_ACCEPTS[this.opts.role],
      bootstrap: this.opts.engine === 'sglang' && this.opts.role === 'prefill' ? this.selfBootstrap : null,
    };
  }

  private async health(res: ServerResponse): Promise<void> {
    try {
      const up = await this.engine.request({
        method: 'GET',
        path: '/health',
        headers: {},
        timeoutMs: HEALTH_TIMEOUT_MS,
        signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
      });
      const text = await up.body.text();
      if (up.statusCode >= 200 && up.statusCode < 300) {
        return sendJson(res, 200, { status: 'ok', engine: { status: up.statusCode } });
      }
      return sendJson(res, 503, {
        status: 'unhealthy',
        engine: { status: up.statusCode, body: text.slice(0, 500) },
      });
    } catch (err) {
      return sendJson(res, 503, { status: 'unhealthy', engine: { error: (err as Error).message } });
    }
  }

  // ---- pass-through -----------------------------------------------------------------------------

  /** Forwards a request unchanged and streams the answer back byte for byte. */
  private async passThrough(
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer | undefined,
    path: string,
    target: string = req.url ?? '/',
  ): Promise<void> {
    // Only origin-form targets are forwarded: `*`, absolute-form (`http://host/...`) and `//host/...`
    // would be an upstream client error (502) or a request aimed elsewhere.
    if (target[0] !== '/' || target[1] === '/') {
      return sendError(res, 400, 'request target must be an absolute path (origin-form)');
    }
    this.metrics.passThrough.inc({ route: path });
    const ctl = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) ctl.abort('client_disconnect');
    });
    let up: Dispatcher.ResponseData;
    try {
      up = await this.engine.request({
        method: (req.method ?? 'GET') as 'GET' | 'POST',
        path: target,
        headers: forwardableRequestHeaders(req.headers),
        body,
        signal: ctl.signal,
      });
    } catch (err) {
      if (!res.headersSent && !ctl.signal.aborted) {
        sendError(res, 502, `engine unreachable: ${(err as Error).message}`);
      }
      return;
    }
    res.writeHead(up.statusCode, forwardableResponseHeaders(up.headers, true));
    try {
      for await (const chunk of up.body) {
        if (!res.write(chunk)) await drained(res);
      }
      res.end();
    } catch {
      res.destroy();
    }
  }

  // ---- generation with an envelope ---------------------------------------------------------------

  private async generate(req: IncomingMessage, res: ServerResponse, route: ClientRoute): Promise<void> {
    const raw = await this.readOrRefuse(req, res);
    if (raw === null) return;
    const path = route === 'chat' ? '/v1/chat/completions' : '/v1/completions';
    // A byte search is enough only without JSON escapes: `"\u005fmotor_dispatch"` is the same key.
    if (raw.indexOf('"_motor_') < 0 && raw.indexOf('\\u') < 0) return this.passThrough(req, res, raw, path);
    const parsed = parseJson(raw);
    if (!parsed.ok) return sendError(res, 400, parsed.message);
    if (!isPlainObject(parsed.value)) return this.passThrough(req, res, raw, path);
    const body = parsed.value;
    if (!(MOTOR_DISPATCH_KEY in body)) {
      if (MOTOR_PREFILL_RESULT_KEY in body) {
        return sendError(
          res,
          400,
          `${MOTOR_PREFILL_RESULT_KEY} needs a ${MOTOR_DISPATCH_KEY}`,
          undefined,
          MOTOR_PREFILL_RESULT_KEY,
        );
      }
      return this.passThrough(req, res, raw, path);
    }
    const envelope = this.checkEnvelope(body);
    if ('status' in envelope) {
      this.metrics.dispatches.inc({ role: 'unknown', leg: 'unknown', outcome: 'rejected' });
      return sendError(
        res,
        envelope.status,
        envelope.message,
        undefined,
        envelope.param,
        envelope.code ?? null,
      );
    }
    const { dispatch, leg } = envelope;
    const begun = this.tracker.begin(dispatch);
    if (!begun.ok) {
      this.metrics.dispatches.inc({ role: dispatch.role, leg, outcome: 'refused' });
      return sendError(res, begun.status, begun.message, undefined, null, begun.code);
    }
    const handle = begun.handle;
    switch (leg) {
      case 'trigger_prefill':
        return this.prepareTrigger(res, envelope, handle, path);
      case 'handoff_prefill':
      case 'bootstrap_prefill':
        return this.runPrefill(req, res, envelope, handle, path);
      default:
        return this.runGeneration(req, res, envelope, handle, path, route);
    }
  }

  /** Validates the envelope, the role, the plan and the surrounding body (400s name the field). */
  private checkEnvelope(body: Record<string, unknown>): Envelope | Refusal {
    const parsed = parseMotorDispatch(body[MOTOR_DISPATCH_KEY]);
    if (!parsed.ok) return { status: 400, message: describeIssue(parsed.error), param: parsed.error.path };
    const dispatch = parsed.value;
    for (const key of LEGACY_FIELDS) {
      if (key in body) {
        return {
          status: 400,
          message: `'${key}' must not be sent next to ${MOTOR_DISPATCH_KEY}: the envelope alone steers KV transfer`,
          param: key,
        };
      }
    }
    const accepted = ROLE_ACCEPTS[this.opts.role];
    if (!accepted.includes(dispatch.role)) {
      return {
        status: 400,
        message:
          `${MOTOR_DISPATCH_KEY}.role: '${dispatch.role}' is not served here (this engine proxy has role ` +
          `${this.opts.role} and accepts ${accepted.join(' or ')})`,
        param: `${MOTOR_DISPATCH_KEY}.role`,
        code: 'role_mismatch',
      };
    }
    if (dispatch.role !== 'single' && !this.opts.dispatchCapabilities.includes(dispatch.dispatch_mode)) {
      return {
        status: 400,
        message:
          `${MOTOR_DISPATCH_KEY}.dispatch_mode: '${dispatch.dispatch_mode}' is not a capability of this engine ` +
          `(dispatch_capabilities: ${this.opts.dispatchCapabilities.join(', ') || 'none'})`,
        param: `${MOTOR_DISPATCH_KEY}.dispatch_mode`,
        code: 'missing_capability',
      };
    }
    const leg = this.adapter.legFor(dispatch);
    if (!leg.ok) return leg;
    let prefillResult: PrefillResult | null = null;
    if (MOTOR_PREFILL_RESULT_KEY in body && leg.leg === 'handoff_decode') {
      const pr = parsePrefillResult(body[MOTOR_PREFILL_RESULT_KEY]);
      if (!pr.ok) return { status: 400, message: describeIssue(pr.error), param: pr.error.path };
      prefillResult = pr.value;
    }
    return { dispatch, prefillResult, body: withoutMotorFields(body), leg: leg.leg };
  }

  /** Headers for an engine request: the client's end-to-end headers plus the adapter's. */
  private engineHeaders(req: IncomingMessage, extra: Record<string, string>): Record<string, string> {
    const headers = forwardableRequestHeaders(req.headers);
    return { ...headers, ...extra, 'content-type': 'application/json' };
  }

  /** Wires abort: a stop or a client disconnect closes the upstream request (and calls SGLang's abort). */
  private wireAbort(res: ServerResponse, handle: AttemptHandle, engineRequestId: string): AbortController {
    const ctl = new AbortController();
    handle.onAbort((reason) => {
      ctl.abort(reason);
      return this.engineAbortCall(engineRequestId);
    });
    res.once('close', () => {
      if (!res.writableFinished) handle.finish('stopped', 'client_disconnect');
    });
    return ctl;
  }

  /** The adapter's extra abort call (SGLang `/abort_request`); vLLM needs only the closed connection. */
  private async engineAbortCall(engineRequestId: string): Promise<void> {
    const plan = this.adapter.abortPlan(engineRequestId);
    if (!plan.request) return;
    try {
      const up = await this.engine.request({
        method: plan.request.method,
        path: plan.request.path,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(plan.request.body),
        timeoutMs: this.opts.peerTimeoutMs,
        signal: AbortSignal.timeout(this.opts.peerTimeoutMs),
      });
      await up.body.dump();
    } catch (err) {
      this.log.warn({ err, request_id: engineRequestId }, 'engine abort call failed');
    }
  }

  private refuseStopped(res: ServerResponse, handle: AttemptHandle): void {
    if (res.headersSent || res.destroyed) return;
    sendError(
      res,
      409,
      `attempt ${handle.attemptSeq} of request ${handle.rootRequestId} was stopped (${handle.stopReason ?? 'other'})`,
      undefined,
      null,
      'dispatch_stopped',
    );
  }

  /** Handoff or bootstrap prefill: run it on the engine, answer a `PrefillResult`. */
  private async runPrefill(
    req: IncomingMessage,
    res: ServerResponse,
    env: Envelope,
    handle: AttemptHandle,
    path: string,
  ): Promise<void> {
    const { dispatch, leg } = env;
    const count = (outcome: string): void =>
      this.metrics.dispatches.inc({ role: dispatch.role, leg, outcome });
    const built = this.adapter.buildEngineRequest(leg, {
      body: env.body,
      dispatch,
      bootstrap: leg === 'bootstrap_prefill' ? this.selfBootstrap : null,
    });
    if (!built.ok) {
      handle.finish('done');
      count('rejected');
      return sendError(res, built.status, built.message, undefined, built.param);
    }
    const ctl = this.wireAbort(res, handle, dispatch.engine_request_id);
    const reply = await this.callEngine(req, res, { path, built, ctl, handle, dispatch, count, what: '' });
    if (reply === null) return;
    const { status, text } = reply;
    if (status >= 400) {
      count('engine_error');
      await this.stopPeer(dispatch, `engine answered ${status}`);
      return sendRaw(res, status, text);
    }
    const json = parseJson(Buffer.from(text));
    const parsed = this.adapter.parsePrefillResponse(leg, json.ok ? json.value : null);
    if (!parsed.ok) {
      count('engine_error');
      await this.stopPeer(dispatch, parsed.message);
      return sendError(res, parsed.status, parsed.message, undefined, parsed.param);
    }
    const result = buildPrefillResult({
      root_request_id: dispatch.root_request_id,
      engine_request_id: dispatch.engine_request_id,
      pair_id: dispatch.pair_id,
      attempt_seq: dispatch.attempt_seq,
      status: 'completed',
      handoff_mode: leg === 'handoff_prefill' ? 'handoff' : 'bootstrap',
      payload: parsed.payload,
      usage: parsed.usage,
      expires_at_ms: leg === 'handoff_prefill' ? Date.now() + this.opts.handoffTtlMs : null,
    });
    count('completed');
    sendRaw(res, 200, stringifyWithBigInt(result), { 'x-request-id': dispatch.engine_request_id });
  }

  /**
   * One whole (non-stream) engine call of a prefill-type leg. Answers the client itself and returns
   * null when the attempt was stopped meanwhile, or when the engine is unreachable (then the peer leg
   * is stopped too); otherwise the attempt is done and the engine's reply is returned.
   */
  private async callEngine(
    req: IncomingMessage,
    res: ServerResponse,
    call: {
      path: string;
      built: EngineRequest;
      ctl: AbortController;
      handle: AttemptHandle;
      dispatch: MotorDispatch;
      count: (outcome: string) => void;
      /** Appended to the peer-stop reason, e.g. ` during the trigger prefill`. */
      what: string;
    },
  ): Promise<{ status: number; text: string; contentType: Record<string, string> } | null> {
    const { handle, count } = call;
    let reply: { status: number; text: string; contentType: Record<string, string> } | undefined;
    try {
      const up = await this.engine.request({
        method: 'POST',
        path: call.path,
        headers: this.engineHeaders(req, call.built.headers),
        body: stringifyWithBigInt(call.built.body),
        signal: call.ctl.signal,
      });
      reply = { status: up.statusCode, contentType: contentTypeOf(up.headers), text: await up.body.text() };
    } catch (err) {
      if (handle.stopReason === null) {
        handle.finish('done');
        count('upstream_error');
        await this.stopPeer(call.dispatch, `engine unreachable${call.what}`);
        sendError(res, 502, `engine unreachable: ${(err as Error).message}`);
        return null;
      }
    }
    if (handle.stopReason !== null || reply === undefined) {
      count('stopped');
      this.refuseStopped(res, handle);
      return null;
    }
    handle.finish('done');
    return reply;
  }

  /** Trigger prefill: cache the body and answer `prepared` at once; the metaserver call runs it. */
  private prepareTrigger(res: ServerResponse, env: Envelope, handle: AttemptHandle, path: string): void {
    const { dispatch } = env;
    const id = dispatch.engine_request_id;
    const entry: PreparedPrefill = { dispatch, body: env.body, path, handle };
    const expiresAt = this.prepared.put(id, entry);
    if (expiresAt === null) {
      handle.finish('stopped', 'prepared_store_full');
      this.metrics.dispatches.inc({ role: 'prefill', leg: env.leg, outcome: 'refused' });
      return sendError(res, 503, `too many prepared prefills waiting (${this.opts.maxPrepared})`);
    }
    handle.onAbort(() => void this.prepared.delete(id));
    this.metrics.dispatches.inc({ role: 'prefill', leg: env.leg, outcome: 'prepared' });
    const result = buildPrefillResult({
      root_request_id: dispatch.root_request_id,
      engine_request_id: id,
      pair_id: dispatch.pair_id,
      attempt_seq: dispatch.attempt_seq,
      status: 'prepared',
      handoff_mode: 'trigger',
      expires_at_ms: expiresAt,
    });
    sendJson(res, 200, result, { 'x-request-id': id });
  }

  /** Single, handoff/trigger/bootstrap decode: forward and relay the (normalised) answer. */
  private async runGeneration(
    req: IncomingMessage,
    res: ServerResponse,
    env: Envelope,
    handle: AttemptHandle,
    path: string,
    route: ClientRoute,
  ): Promise<void> {
    const { dispatch, leg } = env;
    const count = (outcome: string): void =>
      this.metrics.dispatches.inc({ role: dispatch.role, leg, outcome });
    let bootstrap: BootstrapAddress | null = null;
    if (leg === 'bootstrap_decode') {
      const found = await this.peerBootstrap(dispatch);
      if ('status' in found) {
        handle.finish('done');
        count('rejected');
        if (found.status >= 500) await this.stopPeer(dispatch, found.message);
        return sendError(res, found.status, found.message, undefined, found.param);
      }
      bootstrap = found;
    }
    if (leg === 'trigger_decode') {
      // The decode engine will call <prefill url>/v1/metaserver: only an allowed peer may be named.
      const url = dispatch.endpoints.prefill?.url;
      if (url && this.allow.check(url) === null) {
        handle.finish('done');
        count('rejected');
        this.metrics.peerRefused.inc({ use: 'metaserver' });
        const param = `${MOTOR_DISPATCH_KEY}.endpoints.prefill.url`;
        return sendError(
          res,
          400,
          `${param}: ${url} is not an allowed peer (--peer-allow)`,
          undefined,
          param,
        );
      }
    }
    const built = this.adapter.buildEngineRequest(leg, {
      body: env.body,
      dispatch,
      prefillResult: env.prefillResult,
      bootstrap,
    });
    if (!built.ok) {
      handle.finish('done');
      count('rejected');
      return sendError(res, built.status, built.message, undefined, built.param);
    }
    const ctl = this.wireAbort(res, handle, dispatch.engine_request_id);
    let up: Dispatcher.ResponseData;
    try {
      up = await this.engine.request({
        method: 'POST',
        path,
        headers: this.engineHeaders(req, built.headers),
        body: stringifyWithBigInt(built.body),
        signal: ctl.signal,
      });
    } catch (err) {
      if (handle.stopReason !== null) {
        count('stopped');
        return this.refuseStopped(res, handle);
      }
      handle.finish('done');
      count('upstream_error');
      await this.stopPeer(dispatch, 'engine unreachable');
      return sendError(res, 502, `engine unreachable: ${(err as Error).message}`);
    }
    if (up.statusCode >= 400) {
      const text = await up.body.text().catch(() => '');
      handle.finish('done');
      count('engine_error');
      await this.stopPeer(dispatch, `engine answered ${up.statusCode}`);
      return sendRaw(res, up.statusCode, text, contentTypeOf(up.headers));
    }
    const opts = { route, returnTokenIds: env.body.return_token_ids === true };
    const headers = forwardableResponseHeaders(up.headers, false);
    headers['x-request-id'] = dispatch.engine_request_id;
    const contentType = String(up.headers['content-type'] ?? '');
    try {
      if (contentType.includes('text/event-stream')) {
        res.writeHead(up.statusCode, headers);
        const sse = new SseNormalizer(opts);
        for await (const chunk of up.body) {
          const out = sse.push(chunk as Buffer);
          if (out.length > 0 && !res.write(out)) await drained(res);
        }
        res.end(sse.flush());
      } else {
        const raw = Buffer.from(await up.body.arrayBuffer());
        const out = normalizeResponseBody(raw, opts);
        headers['content-length'] = String(out.length);
        res.writeHead(up.statusCode, headers);
        res.end(out);
      }
      handle.finish('done');
      count('completed');
    } catch {
      if (handle.stopReason !== null) {
        count('stopped');
        if (!res.headersSent) return this.refuseStopped(res, handle);
        res.destroy();
        return;
      }
      // The engine died mid-answer: never end a 200 cleanly on a truncated body.
      handle.finish('done');
      count('upstream_error');
      res.destroy();
      await this.stopPeer(dispatch, 'engine connection failed mid-response');
    }
  }

  // ---- trigger: metaserver -----------------------------------------------------------------------

  private async metaserver(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await this.readOrRefuse(req, res);
    if (raw === null) return;
    const parsed = parseJson(raw);
    if (!parsed.ok) return sendError(res, 400, parsed.message);
    const body = parsed.value;
    const requestId = isPlainObject(body) && typeof body.request_id === 'string' ? body.request_id : null;
    if (requestId === null || requestId.length === 0) {
      this.metrics.metaserverCalls.inc({ outcome: 'invalid' });
      return sendError(res, 400, 'request_id: required non-empty string', undefined, 'request_id');
    }
    const fields = parseMetaserverKvFields(body);
    if (!fields.ok) {
      this.metrics.metaserverCalls.inc({ outcome: 'invalid' });
      const entry = this.prepared.take(requestId);
      if (entry) {
        entry.handle.finish('stopped', 'metaserver_invalid');
        await this.stopPeer(entry.dispatch, `metaserver call with invalid KV fields: ${fields.message}`);
      }
      return sendError(res, 400, `invalid metaserver KV fields: ${fields.message}`, undefined, fields.param);
    }
    const ctl = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) ctl.abort('metaserver caller went away');
    });
    const started = performance.now();
    const immediate = this.prepared.take(requestId);
    const entry =
      immediate ?? (await this.prepared.takeOrWait(requestId, this.opts.metaserverWaitMs, ctl.signal));
    const waitOutcome = immediate ? 'immediate' : entry ? 'after_wait' : 'not_found';
    this.metrics.metaserverWait.observe({ outcome: waitOutcome }, (performance.now() - started) / 1000);
    if (!entry) {
      this.metrics.metaserverCalls.inc({ outcome: 'not_found' });
      if (ctl.signal.aborted) return;
      return sendError(
        res,
        404,
        `no prepared prefill for request_id ${requestId} within ${this.opts.metaserverWaitMs} ms ` +
          '(unknown, expired, stopped, or already consumed)',
        undefined,
        'request_id',
      );
    }
    return this.runTriggerPrefill(req, res, entry, fields.value, fields.extra, ctl);
  }

  private async runTriggerPrefill(
    req: IncomingMessage,
    res: ServerResponse,
    entry: PreparedPrefill,
    kv: MetaserverKvFields,
    extra: Record<string, unknown>,
    ctl: AbortController,
  ): Promise<void> {
    const { dispatch, handle } = entry;
    const leg: LegKind = 'trigger_prefill';
    const count = (outcome: string): void => {
      this.metrics.metaserverCalls.inc({ outcome });
      this.metrics.dispatches.inc({ role: 'prefill', leg, outcome });
    };
    const built = this.adapter.buildEngineRequest(leg, { body: entry.body, dispatch, triggerKv: kv });
    if (!built.ok) {
      handle.finish('done');
      count('rejected');
      return sendError(res, built.status, built.message, undefined, built.param);
    }
    built.body.kv_transfer_params = {
      ...extra,
      ...(built.body.kv_transfer_params as Record<string, unknown>),
    };
    handle.onAbort((reason) => {
      ctl.abort(reason);
      return this.engineAbortCall(dispatch.engine_request_id);
    });
    res.once('close', () => {
      if (!res.writableFinished) handle.finish('stopped', 'client_disconnect');
    });
    const reply = await this.callEngine(req, res, {
      path: entry.path,
      built,
      ctl,
      handle,
      dispatch,
      count,
      what: ' during the trigger prefill',
    });
    if (reply === null) return;
    const { status, text, contentType } = reply;
    if (status >= 400) {
      count('engine_error');
      await this.stopPeer(dispatch, `engine answered ${status} to the trigger prefill`);
    } else {
      count('completed');
    }
    sendRaw(res, status, text, { ...contentType, 'x-request-id': dispatch.engine_request_id });
  }

  // ---- bootstrap discovery -----------------------------------------------------------------------

  /** The prefill engine's bootstrap address, from its proxy's `/v1/motor/info` (allow-listed, cached). */
  private async peerBootstrap(dispatch: MotorDispatch): Promise<BootstrapAddress | Refusal> {
    const url = dispatch.endpoints.prefill?.url;
    const param = `${MOTOR_DISPATCH_KEY}.endpoints.prefill.url`;
    if (!url) return { status: 400, message: `${param}: required for a bootstrap decode`, param };
    const origin = this.allow.check(url);
    if (origin === null) {
      this.metrics.peerRefused.inc({ use: 'bootstrap_info' });
      return { status: 400, message: `${param}: ${url} is not an allowed peer (--peer-allow)`, param };
    }
    const now = Date.now();
    const cached = this.bootstrapCache.get(origin);
    if (cached && cached.expiresAt > now) return cached.address;
    try {
      const r = await this.peers.call(origin, 'GET', joinPath(url, '/v1/motor/info'));
      const b = isPlainObject(r.json) ? r.json.bootstrap : null;
      if (r.status !== 200 || !isPlainObject(b) || typeof b.host !== 'string' || typeof b.port !== 'number') {
        return {
          status: 502,
          message: `prefill peer ${origin} did not report a bootstrap address (GET /v1/motor/info answered ${r.status})`,
          param: null,
        };
      }
      const address = { host: b.host, port: b.port };
      if (this.bootstrapCache.size >= BOOTSTRAP_CACHE_MAX) this.bootstrapCache.clear();
      this.bootstrapCache.set(origin, { address, expiresAt: now + BOOTSTRAP_CACHE_TTL_MS });
      return address;
    } catch (err) {
      return {
        status: 502,
        message: `prefill peer ${origin} unreachable: ${(err as Error).message}`,
        param: null,
      };
    }
  }

  // ---- stops ----------------------------------------------------------------------------------------

  private async dispatchStop(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await this.readOrRefuse(req, res);
    if (raw === null) return;
    const parsed = parseJson(raw);
    if (!parsed.ok) return sendError(res, 400, parsed.message);
    const stop = parseDispatchStopRequest(parsed.value);
    if (!stop.ok) return sendError(res, 400, describeIssue(stop.error), undefined, stop.error.path);
    const reason = normalizedReason(stop.value);
    const outcome = this.tracker.stop(stop.value, reason);
    this.metrics.stops.inc({ reason, state: outcome.state });
    if (outcome.state === 'stopped') {
      await Promise.race([outcome.aborted, delay(this.opts.peerTimeoutMs)]);
      this.log.info(
        { root_request_id: stop.value.root_request_id, attempt_seq: stop.value.attempt_seq, reason },
        'attempt stopped',
      );
    }
    sendJson(
      res,
      200,
      buildDispatchStopResponse({
        root_request_id: stop.value.root_request_id,
        attempt_seq: stop.value.attempt_seq,
        accepted:
          outcome.state === 'stopped' ||
          outcome.state === 'already_stopped' ||
          outcome.state === 'already_done',
        state: outcome.state,
        message: outcome.message,
      }),
    );
  }

  /** On this side's own failure: tell the peer leg to stop (`peer_failed`), if it is an allowed peer. */
  private async stopPeer(dispatch: MotorDispatch, why: string): Promise<void> {
    const peer =
      dispatch.role === 'prefill'
        ? dispatch.endpoints.decode
        : dispatch.role === 'decode'
          ? dispatch.endpoints.prefill
          : null;
    if (!peer) return;
    const origin = this.allow.check(peer.url);
    if (origin === null) {
      this.metrics.peerStops.inc({ outcome: 'refused' });
      this.metrics.peerRefused.inc({ use: 'stop' });
      this.log.warn(
        { peer: peer.url, root_request_id: dispatch.root_request_id },
        'peer stop refused: not in --peer-allow',
      );
      return;
    }
    const body = buildDispatchStopRequest({
      root_request_id: dispatch.root_request_id,
      engine_request_id: dispatch.engine_request_id,
      attempt_seq: dispatch.attempt_seq,
      pair_id: dispatch.pair_id,
      reason: 'peer_failed',
      sent_at_ms: Date.now(),
    });
    try {
      const r = await this.peers.call(
        origin,
        'POST',
        joinPath(peer.url, '/v1/dispatch/stop'),
        JSON.stringify(body),
      );
      this.metrics.peerStops.inc({ outcome: r.status === 200 ? 'sent' : 'failed' });
      this.log.info(
        { peer: origin, root_request_id: dispatch.root_request_id, why, status: r.status },
        'peer stopped',
      );
    } catch (err) {
      this.metrics.peerStops.inc({ outcome: 'failed' });
      this.log.warn({ err, peer: origin, why }, 'peer stop failed');
    }
  }
}

// ---- helpers ---------------------------------------------------------------------------------------

function sendRaw(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    ...headers,
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function contentTypeOf(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const ct = headers['content-type'];
  return typeof ct === 'string' ? { 'content-type': ct } : {};
}

/** `path` appended to the base URL's own path (a peer may live under a prefix). */
function joinPath(baseUrl: string, path: string): string {
  return new URL(baseUrl).pathname.replace(/\/+$/, '') + path;
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
