import { createServer, type ServerResponse } from 'node:http';
import type { BodyReader } from '../common/body-reader.js';
import type { FrameErrors } from '../common/frame-errors.js';
import { closeServer, isPlainObject, listen, sendJson } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import { httpFrame, type RouteHandler } from '../common/http-frame.js';
import type { Logger } from '../common/logger.js';
import { RouteTable } from '../common/route-table.js';
import type { BootstrapRooms } from './bootstrap.js';
import { parseJsonPreservingRoom } from './request-body.js';

/** The path a decode simulator POSTs `{room, timeout_ms}` to on the prefill's bootstrap port. */
export const BOOTSTRAP_JOIN_PATH = '/internal/bootstrap/join';

export interface SglangBootstrapServer {
  /** The bound port (what `/server_info` reports as `disaggregation_bootstrap_port`). */
  port: number;
  close(): Promise<void>;
}

/**
 * A SGLang prefill's bootstrap server: its own HTTP listener on `--bootstrap-port` (SGLang's
 * `disaggregation_bootstrap_port`, default 8998, sgl-project/sglang python/sglang/srt/server_args.py;
 * started by the prefill only, `disaggregation/common/conn.py` CommonKVBootstrapServer, which serves `/route` and `/health`), never
 * the HTTP port. The rendezvous protocol on it is the simulator's own (SGLang's `/route` registry is not
 * imitated): `POST /internal/bootstrap/join` waits (bounded) for a prefill offering the room.
 */
export async function startSglangBootstrapServer(
  host: string,
  port: number,
  rooms: BootstrapRooms,
  defaults: { timeoutMs: number; bodies: BodyReader; errors: FrameErrors; logger: Logger },
): Promise<SglangBootstrapServer> {
  const routes = new RouteTable<RouteHandler>()
    .add('GET', '/health', (_req, res) => {
      res.writeHead(200, { 'content-length': 0 });
      res.end();
    })
    .add('POST', BOOTSTRAP_JOIN_PATH, bootstrapJoinRoute(rooms, defaults));
  const server = createServer({ keepAliveTimeout: 65_000 });
  server.on(
    'request',
    httpFrame({
      routes,
      errors: defaults.errors,
      logger: defaults.logger,
      failureLog: 'bootstrap route failed',
    }),
  );
  server.on('connection', (socket) => socket.setNoDelay(true));
  const url = await listen(server, port, host);
  return { port: Number(new URL(url).port), close: () => closeServer(server) };
}

/**
 * The rendezvous route itself; SGLang's Rust server mounts its bootstrap registry on the HTTP
 * listener (sgl-project/sglang rust/sglang-server/src/api_server/disaggregation/bootstrap.rs), so the
 * simulator's `sglang/rust-server` profile serves this on its own port too.
 */
export function bootstrapJoinRoute(
  rooms: BootstrapRooms,
  defaults: { timeoutMs: number; bodies: BodyReader },
): RouteHandler {
  return async (req, res) => {
    const text = (await defaults.bodies.raw(req)).toString('utf8');
    await join(rooms, res, text, defaults.timeoutMs);
  };
}

async function join(
  rooms: BootstrapRooms,
  res: ServerResponse,
  text: string,
  defaultTimeoutMs: number,
): Promise<void> {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok) throw new HttpError(400, parsed.message);
  const body = parsed.value;
  if (!isPlainObject(body)) throw new HttpError(400, 'body must be a JSON object');
  const room = typeof body.room === 'number' ? String(body.room) : body.room;
  if (typeof room !== 'string' || !/^\d+$/.test(room))
    throw new HttpError(400, "'room' must be a decimal integer");
  const timeoutMs = typeof body.timeout_ms === 'number' ? body.timeout_ms : defaultTimeoutMs;
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const payload = await rooms.join(BigInt(room).toString(), timeoutMs, gone.signal);
  if (res.destroyed) return;
  if (!payload)
    throw new HttpError(404, `bootstrap timeout: no prefill for room ${room} within ${timeoutMs} ms`);
  sendJson(res, 200, payload);
}
