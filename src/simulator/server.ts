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
import { authGuard } from './auth.js';
import {
  BOOTSTRAP_JOIN_PATH,
  bootstrapJoinRoute,
  startSglangBootstrapServer,
  type SglangBootstrapServer,
} from './sglang-bootstrap-server.js';
import { handleGenerate } from './sglang-generate.js';
import type { KvEventsPublisher } from './kv-events-publisher.js';
import { rustSglangServerInfo, sglangServerInfo } from './sglang-server-info.js';
import { handleDetokenize, handleTokenize } from './tokenize-route.js';
import { handlePooling, handleRerank, handleScore } from './scoring-routes.js';
import { handleEmbeddings } from './embeddings-route.js';

export interface RunningSimulator {
  url: string;
  core: SimCore;
  /** SGLang prefill: the bound port of its bootstrap server; null otherwise. */
  bootstrapPort: number | null;
  /** With `kvEventsEndpoint`: the bound KV event endpoints (a `*` port resolved); null otherwise. */
  kvEvents: { endpoint: string; replayEndpoint: string | null } | null;
  close(): Promise<void>;
}

const NOT_RECORDED = new Set([
  '/health',
  '/metrics',
  '/v1/models',
  '/server_info',
  '/get_server_info',
  '/internal/kv/heartbeat',
]);
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
  /** Filled in once listening: the base URL and (SGLang prefill) the bootstrap server's port. */
  bound: { url: string; bootstrapPort: number | null };
  bodies: BodyReader;
  /** A POST route: the body is read and the request recorded before `handle` runs. */
  post(path: string, handle: SimHandler): RouteHandler;
}

/**
 * Starts a simulator on `host:port` and logs one `listening` line. Routes:
 *   POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, GET /v1/models, GET /health, GET /metrics
 *   vLLM: POST /tokenize | /detokenize | /rerank | /v1/rerank | /v2/rerank | /score | /v1/score | /pooling
 *   SGLang: POST /generate, POST /abort_request, GET /server_info | /get_server_info
 *   GET /debug/info
 *   GET|POST|DELETE /debug/faults           GET|DELETE /debug/recorded       GET|DELETE /debug/requests
 *   POST /internal/kv/pull | /internal/kv/push | /internal/kv/heartbeat | /internal/kv/release
 * A SGLang prefill also serves its bootstrap rendezvous on `--bootstrap-port` (sglang-bootstrap-server.ts).
 * With `--api-key` / `--admin-api-key` every route is first checked by the engine's rule (auth.ts).
 * Every request but health, metrics, models, server info and /debug/* is recorded with its body (unknown
 * routes too).
 */
export async function startSimulator(
  partial: Partial<SimOptions> = {},
  logger: Logger = createLogger('motor-sim'),
): Promise<RunningSimulator> {
  const opts: SimOptions = { ...defaultSimOptions(), ...partial };
  const core = new SimCore(opts, logger);
  if (opts.tokenizer !== null) {
    const { VllmPrompt } = await import('./vllm-prompt.js');
    core.vllmPrompt = await VllmPrompt.start({
      dir: opts.tokenizer,
      algo: opts.prefixCachingHashAlgo,
      blockSize: opts.blockSize,
      seed: opts.hashSeed,
    });
  }
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
    bound: { url: '', bootstrapPort: null },
    bodies,
    post: (path, handle) => async (req, res) => handle(req, res, await readAndRecord(req, 'POST', path)),
  };
  const routes = new RouteTable<RouteHandler>();
  addApiRoutes(routes, sim);
  addDebugRoutes(routes, sim);
  const allowed = authGuard(opts);
  const frame = httpFrame({
    routes,
    errors: SIMULATOR_ERRORS,
    // Unknown routes (and known paths with another method) are read, recorded, then 404 (no 405).
    noRoute: async (req, res, method, path) => {
      await readAndRecord(req, method, path);
      throw SIMULATOR_ERRORS.notFound(method, path);
    },
    logger,
    failureLog: 'simulator route failed',
  });
  server.on('request', (req, res) => {
    if (allowed(req, res)) frame(req, res);
  });
  server.on('connection', (socket) => {
    socket.setNoDelay(true);
    if (core.faults.refuseConnection()) socket.destroy();
  });
  const url = await listen(server, opts.port, opts.host);
  const wildcard = opts.host === '0.0.0.0' || opts.host === '::';
  core.kv.advertised = bootstrapAddressFromUrl(url, {
    host: opts.advertiseHost ?? (wildcard ? '127.0.0.1' : null),
  });
  // SGLang starts the bootstrap server on prefill instances only (disaggregation/common/conn.py);
  // its Rust server serves it on the HTTP listener instead (engine-profiles.ts `bootstrapOnHttpPort`).
  let bootstrap: SglangBootstrapServer | null = null;
  const onHttpPort = core.profile.bootstrapOnHttpPort;
  if (opts.engine === 'sglang' && opts.role === 'prefill' && !onHttpPort) {
    try {
      bootstrap = await startSglangBootstrapServer(opts.host, opts.bootstrapPort, core.kv.rooms, {
        timeoutMs: opts.bootstrapTimeoutMs,
        bodies,
        errors: SIMULATOR_ERRORS,
        logger,
      });
    } catch (err) {
      await closeServer(server);
      throw new Error(`bootstrap port ${opts.bootstrapPort}: ${(err as Error).message}`, { cause: err });
    }
  }
  const httpBootstrap = onHttpPort && opts.engine === 'sglang' && opts.role === 'prefill';
  sim.bound = { url, bootstrapPort: bootstrap?.port ?? (httpBootstrap ? Number(new URL(url).port) : null) };
  let events: KvEventsPublisher | null = null;
  if (opts.kvEventsEndpoint !== null) {
    try {
      // Loaded only when asked for: ZeroMQ is a native addon.
      const { KvEventsPublisher } = await import('./kv-events-publisher.js');
      events = await KvEventsPublisher.start({
        endpoint: opts.kvEventsEndpoint,
        replayEndpoint: opts.kvEventsReplayEndpoint,
        topic: opts.kvEventsTopic,
        layout: opts.kvEventsLayout,
        bufferSteps: opts.kvEventsBufferSteps,
        blockSize: opts.blockSize,
      });
    } catch (err) {
      await Promise.all([closeServer(server), bootstrap?.close()]);
      throw err;
    }
    core.cache.listener = events;
  }
  const kvEvents = events && { endpoint: events.endpoint, replayEndpoint: events.replayEndpoint };
  logListening(logger, {
    url,
    role: opts.role,
    engine: opts.engine,
    engine_version: core.profile.version,
    engine_id: opts.engineId,
    ...(bootstrap ? { bootstrap_port: bootstrap.port } : {}),
    ...(kvEvents ? { kv_events: kvEvents } : {}),
  });
  return {
    url,
    core,
    bootstrapPort: sim.bound.bootstrapPort,
    kvEvents,
    async close() {
      core.abortAll('shutdown');
      events?.close();
      await core.vllmPrompt?.close();
      core.kv.held.clear();
      await Promise.all([closeServer(server), bootstrap?.close()]);
      await core.kv.peers.close();
    },
  };
}

/** The engine's own API (OpenAI routes, health, metrics, SGLang routes) and its peer-to-peer KV routes. */
function addApiRoutes(routes: RouteTable<RouteHandler>, sim: SimHttp): void {
  const { opts, core, post } = sim;
  if (opts.engine === 'sglang') addSglangRoutes(routes, sim);
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
    );
  routes.add(
    'POST',
    '/v1/embeddings',
    post('/v1/embeddings', (_req, res, text) => handleEmbeddings(opts, res, text)),
  );
  // vLLM's tokenizer and pooling routes (tokenize-route.ts, scoring-routes.ts). SGLang names and
  // shapes its own differently (a prompt-only /v1/tokenize, its own /v1/rerank and /v1/score
  // answers), which the simulator does not imitate: an SGLang simulator answers them 404.
  if (opts.engine === 'sglang') return;
  const vllmRoutes: readonly (readonly [
    string,
    (res: ServerResponse, text: string) => void | Promise<void>,
  ])[] = [
    ['/tokenize', (res, text) => handleTokenize(opts, core, res, text)],
    ['/detokenize', (res, text) => handleDetokenize(opts, core, res, text)],
    ['/rerank', (res, text) => handleRerank(opts, res, text)],
    ['/v1/rerank', (res, text) => handleRerank(opts, res, text)],
    ['/v2/rerank', (res, text) => handleRerank(opts, res, text)],
    ['/score', (res, text) => handleScore(opts, res, text)],
    ['/v1/score', (res, text) => handleScore(opts, res, text)],
    ['/pooling', (res, text) => handlePooling(opts, res, text)],
  ];
  for (const [path, handle] of vllmRoutes)
    routes.add(
      'POST',
      path,
      post(path, (_req, res, text) => handle(res, text)),
    );
}

/** SGLang's native routes: /generate, /abort_request, /server_info (+ deprecated /get_server_info). */
function addSglangRoutes(routes: RouteTable<RouteHandler>, sim: SimHttp): void {
  const { opts, core, post } = sim;
  const serverInfo: RouteHandler = (_req, res) => {
    const u = new URL(sim.bound.url);
    sendJson(
      res,
      200,
      core.profile.bootstrapOnHttpPort
        ? rustSglangServerInfo(opts)
        : sglangServerInfo(opts, { host: opts.host, port: Number(u.port) }, sim.bound.bootstrapPort),
    );
  };
  routes
    .add(
      'POST',
      '/generate',
      post('/generate', (req, res, text) =>
        handleGenerate(req, res, text, () => core.handle('generate', '/generate', req, res, text), {
          url: () => sim.bound.url,
          peers: core.kv.peers,
          timeoutMs: opts.bootstrapTimeoutMs + opts.kvWaitMs,
        }),
      ),
    )
    .add(
      'POST',
      '/abort_request',
      post('/abort_request', (_req, res, text) => abortRequest(core, res, text)),
    )
    .add('GET', '/server_info', serverInfo);
  if (core.profile.bootstrapOnHttpPort) {
    // The Rust frontend has no `/get_server_info` alias (rust/sglang-server/src/api_server/http/info.rs).
    if (opts.role === 'prefill')
      routes.add(
        'POST',
        BOOTSTRAP_JOIN_PATH,
        bootstrapJoinRoute(core.kv.rooms, { timeoutMs: opts.bootstrapTimeoutMs, bodies: sim.bodies }),
      );
  } else routes.add('GET', '/get_server_info', serverInfo);
}

/** Test hooks: engine info, fault injection, the request recorder and the request ledger. */
function addDebugRoutes(routes: RouteTable<RouteHandler>, sim: SimHttp): void {
  const { opts, core, recorder, server, post } = sim;
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
        max_num_batched_tokens: opts.maxNumBatchedTokens,
        enable_chunked_prefill: opts.enableChunkedPrefill,
        long_prefill_token_threshold: opts.longPrefillTokenThreshold,
        kv_lease_ms: core.kv.leaseMs,
        eos_at: opts.eosAt,
        reasoning_parser: opts.reasoningParser,
        time_scale: opts.timeScale,
        advertised: core.kv.advertised,
        bootstrap_port: sim.bound.bootstrapPort,
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

/**
 * SGLang `POST /abort_request` `{rid, abort_all}` (io_struct.py AbortReq: rid defaults to "", abort_all
 * to false): always 200 with an empty body, aborted or not (http_server.py `abort_request`; fixture
 * sglang/server/abort-request.json).
 */
function abortRequest(core: SimCore, res: ServerResponse, text: string): void {
  const body = text.trim() === '' ? {} : parseObject(text);
  if (body.abort_all === true) core.abortAll('abort_request');
  else if (typeof body.rid === 'string' && body.rid !== '') core.abortById(body.rid, 'abort_request');
  else if (body.rid !== undefined && typeof body.rid !== 'string')
    throw new HttpError(400, "'rid' must be a string", { param: 'rid' });
  res.writeHead(200, { 'content-length': 0 });
  res.end();
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
