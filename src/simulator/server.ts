import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { BodyReader } from '../common/body-reader.js';
import { frameErrors } from '../common/frame-errors.js';
import { closeServer, isPlainObject, listen, sendJson } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import { httpFrame, type RouteHandler } from '../common/http-frame.js';
import { RouteTable } from '../common/route-table.js';
import { createLogger, logListening, type Logger } from '../common/logger.js';
import { bootstrapAddressFromUrl } from '../protocol/index.js';
import { SimCore } from './engine.js';
import { FaultPatchSchema } from './faults.js';
import { defaultSimOptions, type SimOptions } from './options.js';
import { Recorder } from './recorder.js';
import { parseJsonPreservingRoom } from './request-body.js';
import type { KvPayload } from './kv-handoff.js';

export interface RunningSimulator {
  url: string;
  core: SimCore;
  close(): Promise<void>;
}

const NOT_RECORDED = new Set(['/health', '/metrics', '/v1/models', '/internal/kv/heartbeat']);
const recorded = (path: string): boolean => !NOT_RECORDED.has(path) && !path.startsWith('/debug/');

/** The simulator's wording of the frame's errors: OpenAI-style, no codes (as vLLM's server). */
const SIMULATOR_ERRORS = frameErrors({
  notFound: (method, path) => new HttpError(404, `no route for ${method} ${path}`),
  bodyTooLarge: (limitBytes) =>
    new HttpError(413, `request body exceeds ${limitBytes} bytes`, { headers: { connection: 'close' } }),
  internal: () => new HttpError(500, 'internal simulator error'),
});

/** A simulator route: gets the body as text ('' for methods without one). */
type SimHandler = (req: IncomingMessage, res: ServerResponse, text: string) => void | Promise<void>;

/** What the route builders share. */
interface SimHttp {
  opts: SimOptions;
  core: SimCore;
  recorder: Recorder;
  server: Server;
  /** A POST route: the body is read and the request recorded before `handle` runs. */
  post(path: string, handle: SimHandler): RouteHandler;
}

/**
 * Starts a simulator on `host:port` and logs one `listening` line. Routes:
 *   POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics
 *   POST /abort_request (SGLang)            GET /debug/info
 *   GET|POST|DELETE /debug/faults           GET|DELETE /debug/recorded       GET|DELETE /debug/requests
 *   POST /internal/kv/pull | /internal/kv/push | /internal/kv/heartbeat | /internal/kv/release
 *   POST /internal/bootstrap/join
 * Every request but health, metrics, models and /debug/* is recorded with its body (unknown routes too).
 */
export async function startSimulator(
  partial: Partial<SimOptions> = {},
  logger: Logger = createLogger('motor-sim'),
): Promise<RunningSimulator> {
  const opts: SimOptions = { ...defaultSimOptions(), ...partial };
  const core = new SimCore(opts, logger);
  const recorder = new Recorder(opts.recordMax);
  // The simulator parses bodies itself (bootstrap rooms stay exact), so no frame depth check.
  const bodies = new BodyReader({ maxBytes: opts.maxBodyBytes, maxDepth: Infinity }, SIMULATOR_ERRORS);
  /** Reads the body of a POST / PUT and records the request when its path is recorded. */
  const readAndRecord = async (req: IncomingMessage, method: string, path: string): Promise<string> => {
    const text = method === 'POST' || method === 'PUT' ? (await bodies.raw(req)).toString('utf8') : '';
    if (recorded(path)) recorder.record(method, path, req.headers, text);
    return text;
  };
  const server = createServer({ keepAliveTimeout: 65_000 });
  const sim: SimHttp = {
    opts,
    core,
    recorder,
    server,
    post: (path, handle) => async (req, res) => handle(req, res, await readAndRecord(req, 'POST', path)),
  };
  const routes = new RouteTable<RouteHandler>();
  addApiRoutes(routes, sim);
  addDebugRoutes(routes, sim);
  server.on(
    'request',
    httpFrame({
      routes,
      errors: SIMULATOR_ERRORS,
      // Unknown routes (and known paths with another method) are read, recorded, then 404 (no 405).
      noRoute: async (req, res, method, path) => {
        await readAndRecord(req, method, path);
        throw SIMULATOR_ERRORS.notFound(method, path);
      },
      logger,
      failureLog: 'simulator route failed',
    }),
  );
  server.on('connection', (socket) => {
    socket.setNoDelay(true);
    if (core.faults.refuseConnection()) socket.destroy();
  });
  const url = await listen(server, opts.port, opts.host);
  const wildcard = opts.host === '0.0.0.0' || opts.host === '::';
  core.kv.advertised = bootstrapAddressFromUrl(url, {
    host: opts.advertiseHost ?? (wildcard ? '127.0.0.1' : null),
  });
  logListening(logger, {
    url,
    role: opts.role,
    engine: opts.engine,
    engine_version: core.profile.version,
    engine_id: opts.engineId,
  });
  return {
    url,
    core,
    async close() {
      core.abortAll('shutdown');
      core.kv.held.clear();
      await closeServer(server);
      await core.kv.peers.close();
    },
  };
}

/** The engine's own API (OpenAI routes, health, metrics, SGLang abort) and its peer-to-peer KV routes. */
function addApiRoutes(routes: RouteTable<RouteHandler>, { opts, core, post }: SimHttp): void {
  const models = JSON.stringify({
    object: 'list',
    data: [
      {
        id: opts.model,
        object: 'model',
        created: Math.floor(Date.now() / 1000),
        owned_by: opts.engine === 'sglang' ? 'sglang' : 'vllm',
        root: opts.model,
        parent: null,
        max_model_len: opts.maxModelLen,
      },
    ],
  });
  routes
    .add(
      'POST',
      '/v1/chat/completions',
      post('/v1/chat/completions', (req, res, text) =>
        core.handle('chat', '/v1/chat/completions', req, res, text),
      ),
    )
    .add(
      'POST',
      '/v1/completions',
      post('/v1/completions', (req, res, text) =>
        core.handle('completion', '/v1/completions', req, res, text),
      ),
    )
    .add('GET', '/v1/models', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(models) });
      res.end(models);
    })
    .add('GET', '/health', (_req, res) => {
      res.writeHead(200, { 'content-length': 0 });
      res.end();
    })
    .add('GET', '/metrics', async (_req, res) => {
      const body = await core.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': core.metrics.registry.contentType });
      res.end(body);
    })
    .add(
      'POST',
      '/abort_request',
      post('/abort_request', (_req, res, text) => abortRequest(core, res, text)),
    )
    .add(
      'POST',
      '/internal/kv/pull',
      post('/internal/kv/pull', (_req, res, text) => internalPull(core, res, text)),
    )
    .add(
      'POST',
      '/internal/kv/push',
      post('/internal/kv/push', (_req, res, text) => internalPush(core, res, text)),
    )
    .add(
      'POST',
      '/internal/kv/heartbeat',
      post('/internal/kv/heartbeat', (_req, res, text) => internalHeartbeat(core, res, text)),
    )
    .add(
      'POST',
      '/internal/kv/release',
      post('/internal/kv/release', (_req, res, text) => internalRelease(core, res, text)),
    )
    .add(
      'POST',
      '/internal/bootstrap/join',
      post('/internal/bootstrap/join', (req, res, text) => internalJoin(core, req, res, text)),
    );
}

/** Test hooks: engine info, fault injection, the request recorder and the request ledger. */
function addDebugRoutes(
  routes: RouteTable<RouteHandler>,
  { opts, core, recorder, server, post }: SimHttp,
): void {
  routes
    .add('GET', '/debug/info', (_req, res) =>
      sendJson(res, 200, {
        engine: opts.engine,
        engine_version: core.profile.version,
        role: opts.role,
        kv_connector: opts.kvConnector,
        engine_id: opts.engineId,
        model: opts.model,
        block_size: opts.blockSize,
        kv_blocks: opts.kvBlocks,
        max_num_seqs: opts.maxNumSeqs,
        kv_lease_ms: core.kv.leaseMs,
        eos_at: opts.eosAt,
        time_scale: opts.timeScale,
        advertised: core.kv.advertised,
      }),
    )
    .add('GET', '/debug/faults', (_req, res) => sendJson(res, 200, core.faults.config))
    .add(
      'POST',
      '/debug/faults',
      post('/debug/faults', (_req, res, text) => {
        const parsed = parseJsonPreservingRoom(text);
        if (!parsed.ok) throw new HttpError(400, parsed.message);
        const patch = FaultPatchSchema.safeParse(parsed.value);
        if (!patch.success) throw new HttpError(400, `invalid faults: ${patch.error.message}`);
        const set = core.faults.set(patch.data);
        // Refusing connections must reach clients that hold pooled keep-alive sockets too.
        if (set.refuse_connections !== 0) server.closeIdleConnections();
        sendJson(res, 200, set);
      }),
    )
    .add('DELETE', '/debug/faults', (_req, res) => sendJson(res, 200, core.faults.reset()))
    .add('GET', '/debug/recorded', (_req, res) => sendJson(res, 200, recorder.list()))
    .add('DELETE', '/debug/recorded', (_req, res) => {
      recorder.clear();
      sendJson(res, 200, { cleared: true });
    })
    .add('GET', '/debug/requests', async (req, res) => {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const wait = Number(new URLSearchParams(q < 0 ? '' : url.slice(q + 1)).get('wait_idle_ms') ?? 0);
      if (wait > 0) await core.ledger.waitIdle(Math.min(wait, 60_000));
      sendJson(res, 200, { ...core.ledger.snapshot(), kv_held: core.kv.list() });
    })
    .add('DELETE', '/debug/requests', (_req, res) => {
      core.ledger.clearFinished();
      sendJson(res, 200, { cleared: true });
    });
}

/** The body as a JSON object; anything else is a 400 (thrown for the frame to render). */
function parseObject(text: string): Record<string, unknown> {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok) throw new HttpError(400, parsed.message);
  if (!isPlainObject(parsed.value)) throw new HttpError(400, 'body must be a JSON object');
  return parsed.value;
}

function abortRequest(core: SimCore, res: ServerResponse, text: string): void {
  if (core.opts.engine !== 'sglang') throw SIMULATOR_ERRORS.notFound('POST', '/abort_request');
  const body = parseObject(text);
  if (body.abort_all === true) {
    core.abortAll('abort_request');
    return sendJson(res, 200, { aborted: 'all' });
  }
  if (typeof body.rid !== 'string') throw new HttpError(400, "'rid' must be a string", { param: 'rid' });
  sendJson(res, 200, { rid: body.rid, aborted: core.abortById(body.rid, 'abort_request') });
}

function internalPull(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(text);
  if (typeof body.remote_request_id !== 'string')
    throw new HttpError(400, "'remote_request_id' must be a string");
  const r = core.kv.held.pull(body.remote_request_id, body.remote_engine_id, body.remote_block_ids);
  if (!r.ok) throw new HttpError(r.status, r.message);
  sendJson(res, 200, r.payload);
}

function internalPush(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(text);
  if (typeof body.request_id !== 'string') throw new HttpError(400, "'request_id' must be a string");
  const payload: KvPayload = {
    num_tokens: Number(body.num_tokens),
    prompt_hash: Number(body.prompt_hash),
    block_ids: Array.isArray(body.block_ids) ? (body.block_ids as number[]) : [],
    engine_id: String(body.engine_id),
  };
  if (!core.kv.inbox.deliver(body.request_id, payload)) {
    throw new HttpError(404, `no decode request ${body.request_id} is waiting for KV on this instance`);
  }
  sendJson(res, 200, { request_id: body.request_id, accepted: true });
}

/** A decode's lease heartbeat (newest NIXL): the held KV of the request runs a full lease from now. */
function internalHeartbeat(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(text);
  if (typeof body.remote_request_id !== 'string')
    throw new HttpError(400, "'remote_request_id' must be a string");
  sendJson(res, 200, { renewed: core.kv.held.renew(body.remote_request_id, core.kv.leaseMs) });
}

function internalRelease(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(text);
  if (typeof body.remote_request_id !== 'string')
    throw new HttpError(400, "'remote_request_id' must be a string");
  sendJson(res, 200, { released: core.kv.held.release(body.remote_request_id) });
}

async function internalJoin(
  core: SimCore,
  req: IncomingMessage,
  res: ServerResponse,
  text: string,
): Promise<void> {
  const body = parseObject(text);
  const room = typeof body.room === 'number' ? String(body.room) : body.room;
  if (typeof room !== 'string' || !/^\d+$/.test(room))
    throw new HttpError(400, "'room' must be a decimal integer");
  const timeoutMs = typeof body.timeout_ms === 'number' ? body.timeout_ms : core.opts.bootstrapTimeoutMs;
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const payload = await core.kv.rooms.join(BigInt(room).toString(), timeoutMs, gone.signal);
  if (res.destroyed) return;
  if (!payload)
    throw new HttpError(404, `bootstrap timeout: no prefill for room ${room} within ${timeoutMs} ms`);
  void req;
  sendJson(res, 200, payload);
}
