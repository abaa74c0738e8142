import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  BodyTooLargeError,
  closeServer,
  isPlainObject,
  listen,
  readBody,
  sendError,
  sendJson,
} from '../common/http.js';
import { createLogger, logListening, type Logger } from '../common/logger.js';
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

const NOT_RECORDED = new Set(['/health', '/metrics', '/v1/models']);

/**
 * Starts a simulator on `host:port` and logs one `listening` line. Routes:
 *   POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics
 *   POST /abort_request (SGLang)            GET /debug/info
 *   GET|POST|DELETE /debug/faults           GET|DELETE /debug/recorded       GET|DELETE /debug/requests
 *   POST /internal/kv/pull | /internal/kv/push | /internal/kv/release | /internal/bootstrap/join
 */
export async function startSimulator(
  partial: Partial<SimOptions> = {},
  logger: Logger = createLogger('motor-sim'),
): Promise<RunningSimulator> {
  const opts: SimOptions = { ...defaultSimOptions(), ...partial };
  const core = new SimCore(opts, logger);
  const recorder = new Recorder(opts.recordMax);
  const models = JSON.stringify({
    object: 'list',
    data: [
      {
        id: opts.model,
        object: 'model',
        created: Math.floor(Date.now() / 1000),
        owned_by: opts.engine,
        root: opts.model,
        parent: null,
        max_model_len: opts.maxModelLen,
      },
    ],
  });

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    let text = '';
    if (method === 'POST' || method === 'PUT') {
      try {
        const buf = await readBody(req, opts.maxBodyBytes);
        text = buf.toString('utf8');
      } catch (err) {
        if (err instanceof BodyTooLargeError) {
          res.setHeader('connection', 'close');
          return sendError(res, 413, err.message);
        }
        return; // client went away while sending
      }
    }
    if (!NOT_RECORDED.has(path) && !path.startsWith('/debug/'))
      recorder.record(method, path, req.headers, text);

    switch (`${method} ${path}`) {
      case 'POST /v1/chat/completions':
        return core.handle('chat', path, req, res, text);
      case 'POST /v1/completions':
        return core.handle('completion', path, req, res, text);
      case 'GET /v1/models':
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(models),
        });
        return void res.end(models);
      case 'GET /health':
        res.writeHead(200, { 'content-length': 0 });
        return void res.end();
      case 'GET /metrics': {
        const body = await core.metrics.registry.metrics();
        res.writeHead(200, { 'content-type': core.metrics.registry.contentType });
        return void res.end(body);
      }
      case 'GET /debug/info':
        return sendJson(res, 200, {
          engine: opts.engine,
          role: opts.role,
          kv_connector: opts.kvConnector,
          engine_id: opts.engineId,
          model: opts.model,
          block_size: opts.blockSize,
          kv_blocks: opts.kvBlocks,
          max_num_seqs: opts.maxNumSeqs,
          time_scale: opts.timeScale,
          advertised: core.advertised,
        });
      case 'GET /debug/faults':
        return sendJson(res, 200, core.faults.config);
      case 'POST /debug/faults': {
        const parsed = parseJsonPreservingRoom(text);
        if (!parsed.ok) return sendError(res, 400, parsed.message);
        const patch = FaultPatchSchema.safeParse(parsed.value);
        if (!patch.success) return sendError(res, 400, `invalid faults: ${patch.error.message}`);
        const set = core.faults.set(patch.data);
        // Refusing connections must reach clients that hold pooled keep-alive sockets too.
        if (set.refuse_connections !== 0) server.closeIdleConnections();
        return sendJson(res, 200, set);
      }
      case 'DELETE /debug/faults':
        return sendJson(res, 200, core.faults.reset());
      case 'GET /debug/recorded':
        return sendJson(res, 200, recorder.list());
      case 'DELETE /debug/recorded':
        recorder.clear();
        return sendJson(res, 200, { cleared: true });
      case 'GET /debug/requests': {
        const wait = Number(new URLSearchParams(q < 0 ? '' : url.slice(q + 1)).get('wait_idle_ms') ?? 0);
        if (wait > 0) await core.ledger.waitIdle(Math.min(wait, 60_000));
        return sendJson(res, 200, { ...core.ledger.snapshot(), kv_held: core.kvHeld() });
      }
      case 'DELETE /debug/requests':
        core.ledger.clearFinished();
        return sendJson(res, 200, { cleared: true });
      case 'POST /abort_request':
        return abortRequest(core, res, text);
      case 'POST /internal/kv/pull':
        return internalPull(core, res, text);
      case 'POST /internal/kv/push':
        return internalPush(core, res, text);
      case 'POST /internal/kv/release':
        return internalRelease(core, res, text);
      case 'POST /internal/bootstrap/join':
        return internalJoin(core, req, res, text);
      default:
        return sendError(res, 404, `no route for ${method} ${path}`);
    }
  };

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    route(req, res).catch((err: unknown) => {
      logger.error({ err }, 'simulator route failed');
      if (!res.headersSent) sendError(res, 500, 'internal simulator error');
      else res.destroy();
    });
  });
  server.on('connection', (socket) => {
    socket.setNoDelay(true);
    if (core.faults.refuseConnection()) socket.destroy();
  });
  const url = await listen(server, opts.port, opts.host);
  const bound = new URL(url);
  const wildcard = opts.host === '0.0.0.0' || opts.host === '::';
  core.advertised = {
    host: opts.advertiseHost ?? (wildcard ? '127.0.0.1' : bound.hostname.replace(/^\[|\]$/g, '')),
    port: Number(bound.port),
  };
  logListening(logger, { url, role: opts.role, engine: opts.engine, engine_id: opts.engineId });
  return {
    url,
    core,
    async close() {
      core.abortAll('shutdown');
      core.held.clear();
      await closeServer(server);
      await core.peers.close();
    },
  };
}

function parseObject(res: ServerResponse, text: string): Record<string, unknown> | null {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok || !isPlainObject(parsed.value)) {
    sendError(res, 400, parsed.ok ? 'body must be a JSON object' : parsed.message);
    return null;
  }
  return parsed.value;
}

function abortRequest(core: SimCore, res: ServerResponse, text: string): void {
  if (core.opts.engine !== 'sglang') return sendError(res, 404, 'no route for POST /abort_request');
  const body = parseObject(res, text);
  if (!body) return;
  if (body.abort_all === true) {
    core.abortAll('abort_request');
    return sendJson(res, 200, { aborted: 'all' });
  }
  if (typeof body.rid !== 'string') return sendError(res, 400, "'rid' must be a string", undefined, 'rid');
  sendJson(res, 200, { rid: body.rid, aborted: core.abortById(body.rid, 'abort_request') });
}

function internalPull(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(res, text);
  if (!body) return;
  if (typeof body.remote_request_id !== 'string')
    return sendError(res, 400, "'remote_request_id' must be a string");
  const r = core.held.pull(body.remote_request_id, body.remote_engine_id, body.remote_block_ids);
  if (!r.ok) return sendError(res, r.status, r.message);
  sendJson(res, 200, r.payload);
}

function internalPush(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(res, text);
  if (!body) return;
  if (typeof body.request_id !== 'string') return sendError(res, 400, "'request_id' must be a string");
  const payload: KvPayload = {
    num_tokens: Number(body.num_tokens),
    prompt_hash: Number(body.prompt_hash),
    block_ids: Array.isArray(body.block_ids) ? (body.block_ids as number[]) : [],
    engine_id: String(body.engine_id),
  };
  if (!core.inbox.deliver(body.request_id, payload)) {
    return sendError(res, 404, `no decode request ${body.request_id} is waiting for KV on this instance`);
  }
  sendJson(res, 200, { request_id: body.request_id, accepted: true });
}

function internalRelease(core: SimCore, res: ServerResponse, text: string): void {
  const body = parseObject(res, text);
  if (!body) return;
  if (typeof body.remote_request_id !== 'string')
    return sendError(res, 400, "'remote_request_id' must be a string");
  sendJson(res, 200, { released: core.held.release(body.remote_request_id) });
}

async function internalJoin(
  core: SimCore,
  req: IncomingMessage,
  res: ServerResponse,
  text: string,
): Promise<void> {
  const body = parseObject(res, text);
  if (!body) return;
  const room = typeof body.room === 'number' ? String(body.room) : body.room;
  if (typeof room !== 'string' || !/^\d+$/.test(room))
    return sendError(res, 400, "'room' must be a decimal integer");
  const timeoutMs = typeof body.timeout_ms === 'number' ? body.timeout_ms : core.opts.bootstrapTimeoutMs;
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const payload = await core.rooms.join(BigInt(room).toString(), timeoutMs, gone.signal);
  if (res.destroyed) return;
  if (!payload)
    return sendError(res, 404, `bootstrap timeout: no prefill for room ${room} within ${timeoutMs} ms`);
  void req;
  sendJson(res, 200, payload);
}
