import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from './logger.js';

/**
 * Server-side connection limits of a public `node:http` listener (the coordinator's gateway and the
 * engine proxy). What Node 20 does for each, as tested in server-limits.test.ts:
 * - `headersTimeoutMs`: counted from the connection's start, so a socket that never sends a byte gets
 *   `408` and is closed; checked every `connectionsCheckingInterval`, which this module sets to a
 *   fraction of the smallest timeout (Node's default is 30 s; `server-limits.test.ts` shows the rest).
 * - `requestTimeoutMs`: until the request (headers and body) is fully received; a response streamed
 *   after that is not cut by it.
 * - `keepAliveTimeoutMs`: idle time between requests on a kept-alive connection (Node adds 1 s, so that
 *   a client honouring the `Keep-Alive: timeout=` header it is sent does not race the close).
 * - `idleTimeoutMs`: socket inactivity (`server.timeout`), except while a response is in progress (a
 *   generation may be silent for a while); Node alone would cut such a stream.
 * - `maxConnections`: open connections; the next one is answered `503` and closed.
 * `0` turns any of them off.
 */
export interface ServerLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
}

export const DEFAULT_SERVER_LIMITS: Readonly<ServerLimits> = Object.freeze({
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 120_000,
  keepAliveTimeoutMs: 65_000,
  idleTimeoutMs: 60_000,
  maxConnections: 10_000,
});

/** Node refuses a header timeout above the request timeout; the one-line reason, or null. */
export function serverLimitsProblem(limits: ServerLimits, names = SERVER_LIMIT_NAMES): string | null {
  const { headersTimeoutMs: h, requestTimeoutMs: r } = limits;
  if (h > 0 && r > 0 && h > r) {
    return `${names.headersTimeoutMs} (${h}) must not exceed ${names.requestTimeoutMs} (${r})`;
  }
  return null;
}

/** How `serverLimitsProblem` names the limits (config keys or CLI flags). */
export const SERVER_LIMIT_NAMES: Readonly<Record<keyof ServerLimits, string>> = Object.freeze({
  headersTimeoutMs: 'headersTimeoutMs',
  requestTimeoutMs: 'requestTimeoutMs',
  keepAliveTimeoutMs: 'keepAliveTimeoutMs',
  idleTimeoutMs: 'idleTimeoutMs',
  maxConnections: 'maxConnections',
});

const kResponse = Symbol('motor.response');
type MarkedSocket = Socket & { [kResponse]?: ServerResponse };

const REFUSAL_BODY = (cap: number): string =>
  JSON.stringify({
    error: {
      message: `too many open connections (limit ${cap}); retry later`,
      type: 'server_error',
      param: null,
      code: 'too_many_connections',
    },
  });

/** A `node:http` server with `limits` applied (see `ServerLimits`); `log` hears of refused connections. */
export function createLimitedServer(limits: ServerLimits, listener: RequestListener, log?: Logger): Server {
  const problem = serverLimitsProblem(limits);
  if (problem !== null) throw new RangeError(problem);
  // Node 20 enforces these two on a periodic check (default every 30 s), not on per-socket timers.
  const checked = [limits.headersTimeoutMs, limits.requestTimeoutMs];
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: checkEvery(checked),
    },
    listener,
  );
  if (limits.idleTimeoutMs > 0) spareStreams(server, limits.idleTimeoutMs);
  if (limits.maxConnections > 0) capConnections(server, limits.maxConnections, log);
  return server;
}

/** The check period: 1/4 of the smallest timeout set, 10 ms – 1 s (one pass over the open connections). */
function checkEvery(timeouts: number[]): number {
  let smallest = 4_000;
  for (const t of timeouts) if (t > 0 && t < smallest) smallest = t;
  return Math.max(10, Math.floor(smallest / 4));
}

/** `server.timeout`, but a socket with a response in progress is left to the route (Node would destroy it). */
function spareStreams(server: Server, idleMs: number): void {
  server.timeout = idleMs;
  server.on('request', (req, res: ServerResponse) => {
    (req.socket as MarkedSocket)[kResponse] = res;
  });
  // With a listener here, Node no longer destroys timed-out sockets itself (keep-alive ones included).
  server.on('timeout', (socket: MarkedSocket) => {
    const res = socket[kResponse];
    if (res !== undefined && !res.writableEnded) return;
    socket.destroy();
  });
}

/** Counts open connections; beyond `cap` a raw `503` with `Connection: close`, never parsed as HTTP. */
function capConnections(server: Server, cap: number, log: Logger | undefined): void {
  const body = REFUSAL_BODY(cap);
  const refusal =
    'HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n' +
    `Retry-After: 1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  // http.Server parses a connection in its own 'connection' listener: run it only under the cap.
  const parse = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  let open = 0;
  const closed = (): void => {
    open--;
  };
  // One warning per 10 s at most, with the count since the last one (an attack must not flood the log).
  let refused = 0;
  let warnedAt = -Infinity;
  server.on('connection', (socket: Socket) => {
    if (open >= cap) {
      refused++;
      const now = performance.now();
      if (log !== undefined && now - warnedAt >= 10_000) {
        log.warn(
          { max_connections: cap, refused },
          'connection cap reached: refusing new connections with 503',
        );
        warnedAt = now;
        refused = 0;
      }
      socket.on('error', noop);
      socket.resume(); // discard what it sends, so closing does not reset the refusal away
      socket.end(refusal);
      socket.once('finish', () => socket.destroy());
      return;
    }
    open++;
    socket.once('close', closed);
    for (const listener of parse) listener.call(server, socket);
  });
}

function noop(): void {}
