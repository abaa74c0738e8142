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
 * - `maxConnections`: open connections; at the cap the oldest that has sent nothing yet is closed to
 *   make room, else the next one is answered `503` and closed (`ConnectionShedding` adds more).
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
      message: `too many open connections (limit ${cap}, or this source's share of it); retry later`,
      type: 'server_error',
      param: null,
      code: 'too_many_connections',
    },
  });

/** Why a connection was shed (`ConnectionShedding.onShed`; a metric label). */
export type ShedReason =
  /** The source already holds `maxPerSource` connections: refused with a raw 503. */
  | 'per_source'
  /** At the cap, the oldest connection that had not yet sent a request was closed to make room. */
  | 'idle_evicted'
  /** At the cap with nothing to evict: refused with a raw 503 (or let into the reserve). */
  | 'cap'
  /** A connection let in over the cap asked for something other than the reserved paths: 503. */
  | 'reserve_only';

/** How a listener sheds connections under a flood (all optional; none: only `maxConnections`). */
export interface ConnectionShedding {
  /** Open connections one remote address may hold (0 / unset: no limit). */
  maxPerSource?: number;
  /**
   * Paths (e.g. `/health`, `/ready`, `/metrics`) still served over the cap: up to `RESERVED_CONNECTIONS`
   * more connections are let in, each answering only these.
   */
  reservedPaths?: ReadonlySet<string>;
  /** Hears of every shed connection (a counter). */
  onShed?: (reason: ShedReason) => void;
}

/** Connections let in over the cap for the reserved paths: enough for a few probes and scrapers. */
export const RESERVED_CONNECTIONS = 32;

/**
 * A `node:http` server with `limits` applied (see `ServerLimits`); `log` hears of refused connections,
 * `shedding` says how a flood is shed (`ConnectionShedding`).
 */
export function createLimitedServer(
  limits: ServerLimits,
  listener: RequestListener,
  log?: Logger,
  shedding: ConnectionShedding = {},
): Server {
  const problem = serverLimitsProblem(limits);
  if (problem !== null) throw new RangeError(problem);
  // Node 20 enforces these two on a periodic check (default every 30 s), not on per-socket timers.
  const checked = [limits.headersTimeoutMs, limits.requestTimeoutMs];
  const perSource = shedding.maxPerSource ?? 0;
  const capped = limits.maxConnections > 0 || perSource > 0;
  const gate = capped ? new ConnectionGate(limits.maxConnections, shedding, log) : null;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: checkEvery(checked),
    },
    gate === null ? listener : gate.guard(listener),
  );
  if (limits.idleTimeoutMs > 0) spareStreams(server, limits.idleTimeoutMs);
  gate?.install(server);
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

interface OpenConnection {
  readonly source: string;
  /** Let in over the cap: serves the reserved paths only. */
  readonly reserve: boolean;
}

/**
 * Counts open connections, in all and per source. At the cap the oldest connection that has not sent
 * a request yet (a flood's sockets, a slow-loris mid-headers) is closed to make room, so sockets that
 * send nothing never keep others out for the header timeout; kept-alive and busy ones are never
 * closed. With nothing to close, up to `RESERVED_CONNECTIONS` more are let in for the reserved paths,
 * then a raw `503` with `Connection: close`, never parsed as HTTP.
 */
class ConnectionGate {
  private readonly open = new Map<Socket, OpenConnection>();
  /** Connections that have not sent a request yet, oldest first. */
  private readonly fresh = new Set<Socket>();
  private readonly perSource = new Map<string, number>();
  private reserved = 0;
  private readonly refusal: string;
  private readonly maxPerSource: number;
  private readonly reserve: number;
  // One warning per 10 s at most, with the count since the last one (an attack must not flood the log).
  private refused = 0;
  private warnedAt = -Infinity;

  constructor(
    private readonly cap: number,
    private readonly shedding: ConnectionShedding,
    private readonly log: Logger | undefined,
  ) {
    const body = REFUSAL_BODY(cap);
    this.refusal =
      'HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n' +
      `Retry-After: 1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    this.maxPerSource = shedding.maxPerSource ?? 0;
    this.reserve = cap > 0 && shedding.reservedPaths !== undefined ? RESERVED_CONNECTIONS : 0;
  }

  /** The request listener: a connection's first request takes it off the evictable list; the reserve's are checked. */
  guard(listener: RequestListener): RequestListener {
    const paths = this.shedding.reservedPaths;
    return (req, res) => {
      const socket = req.socket;
      this.fresh.delete(socket);
      if (this.open.get(socket)?.reserve === true && !paths?.has(pathOf(req.url))) {
        this.shedding.onShed?.('reserve_only');
        res.shouldKeepAlive = false;
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', connection: 'close' });
        return void res.end(REFUSAL_BODY(this.cap));
      }
      listener(req, res);
    };
  }

  /** http.Server parses a connection in its own 'connection' listener: run it only for those let in. */
  install(server: Server): void {
    const parse = server.listeners('connection') as ((socket: Socket) => void)[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => {
      const admitted = this.admit(socket);
      if (admitted === null) return;
      this.open.set(socket, admitted);
      if (!admitted.reserve) this.fresh.add(socket);
      else this.reserved++;
      this.perSource.set(admitted.source, (this.perSource.get(admitted.source) ?? 0) + 1);
      socket.once('close', () => this.forget(socket));
      for (const listener of parse) listener.call(server, socket);
    });
  }

  private admit(socket: Socket): OpenConnection | null {
    const source = socket.remoteAddress ?? '';
    if (this.maxPerSource > 0 && (this.perSource.get(source) ?? 0) >= this.maxPerSource) {
      this.refuse(socket, 'per_source');
      return null;
    }
    if (this.cap === 0 || this.open.size - this.reserved < this.cap) return { source, reserve: false };
    const oldest = this.fresh.values().next();
    if (!oldest.done) {
      this.forget(oldest.value);
      oldest.value.destroy();
      this.shedding.onShed?.('idle_evicted');
      return { source, reserve: false };
    }
    if (this.reserved < this.reserve) {
      this.shedding.onShed?.('cap');
      return { source, reserve: true };
    }
    this.refuse(socket, 'cap');
    return null;
  }

  private forget(socket: Socket): void {
    const entry = this.open.get(socket);
    if (entry === undefined) return;
    this.open.delete(socket);
    this.fresh.delete(socket);
    if (entry.reserve) this.reserved--;
    const left = (this.perSource.get(entry.source) ?? 1) - 1;
    if (left > 0) this.perSource.set(entry.source, left);
    else this.perSource.delete(entry.source);
  }

  private refuse(socket: Socket, reason: ShedReason): void {
    this.shedding.onShed?.(reason);
    this.refused++;
    const now = performance.now();
    if (this.log !== undefined && now - this.warnedAt >= 10_000) {
      const limits = { max_connections: this.cap, max_per_source: this.maxPerSource || undefined };
      this.log.warn(
        { ...limits, refused: this.refused },
        'connection limits reached: refusing new connections with 503',
      );
      this.warnedAt = now;
      this.refused = 0;
    }
    socket.on('error', noop);
    socket.resume(); // discard what it sends, so closing does not reset the refusal away
    socket.end(this.refusal);
    socket.once('finish', () => socket.destroy());
  }
}

/** The path of a request target, without its query. */
function pathOf(url: string | undefined): string {
  const target = url ?? '';
  const query = target.indexOf('?');
  return query === -1 ? target : target.slice(0, query);
}

function noop(): void {}
