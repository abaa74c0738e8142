import { Agent, createServer, type RequestListener, type Server } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { getOver, rawSocket } from '../../test/helpers/raw-sockets.js';
import { closeServer, listen } from './http.js';
import type { Logger } from './logger.js';
import {
  createLimitedServer,
  RESERVED_CONNECTIONS,
  serverLimitsProblem,
  type ConnectionShedding,
  type ServerLimits,
  type ShedReason,
} from './server-limits.js';

const OFF: ServerLimits = {
  headersTimeoutMs: 0,
  requestTimeoutMs: 0,
  keepAliveTimeoutMs: 0,
  idleTimeoutMs: 0,
  maxConnections: 0,
};
const BOUND = 200;
// A limit is checked at up to 1/4 of it late; the rest is scheduling slack on a loaded machine.
const SLACK = BOUND / 4 + 400;
// A close this late is still the limit's: with the limits off a socket stays open for good (below). An
// upper bound of BOUND + SLACK was missed at load 20.
const LATE = 5_000;

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => closeServer(s)));
});

async function serve(
  limits: Partial<ServerLimits>,
  listener: RequestListener,
  log?: Logger,
  shedding?: ConnectionShedding,
): Promise<string> {
  const server = createLimitedServer({ ...OFF, ...limits }, listener, log, shedding);
  servers.push(server);
  return listen(server, 0, '127.0.0.1');
}

const ok: RequestListener = (req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
};
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('serverLimitsProblem', () => {
  it.each([
    [{ headersTimeoutMs: 10, requestTimeoutMs: 20 }, null],
    [{ headersTimeoutMs: 20, requestTimeoutMs: 20 }, null],
    [{ headersTimeoutMs: 0, requestTimeoutMs: 20 }, null],
    [{ headersTimeoutMs: 30, requestTimeoutMs: 0 }, null],
    [
      { headersTimeoutMs: 30, requestTimeoutMs: 20 },
      'headersTimeoutMs (30) must not exceed requestTimeoutMs (20)',
    ],
  ])('%j → %s', (limits, problem) => {
    expect(serverLimitsProblem({ ...OFF, ...limits })).toBe(problem);
    if (problem !== null) expect(() => createLimitedServer({ ...OFF, ...limits }, ok)).toThrow(problem);
  });
});

describe('createLimitedServer closes idle connections', () => {
  it.each([
    [
      'a silent connection, by the header timeout (408)',
      { headersTimeoutMs: BOUND, requestTimeoutMs: 1_000 },
      '',
      /^HTTP\/1\.1 408 /,
    ],
    ['a silent connection, by the idle timeout', { idleTimeoutMs: BOUND }, '', /^$/],
    [
      'half a request line, by the header timeout',
      { headersTimeoutMs: BOUND },
      'GET /hea',
      /^HTTP\/1\.1 408 /,
    ],
    [
      'an unfinished body, by the request timeout',
      { requestTimeoutMs: BOUND },
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc',
      /^HTTP\/1\.1 408 /,
    ],
    [
      'a kept-alive connection after its request, by the keep-alive timeout',
      { keepAliveTimeoutMs: BOUND },
      'GET / HTTP/1.1\r\nHost: x\r\n\r\n',
      /^HTTP\/1\.1 200 /,
    ],
    [
      'a kept-alive connection after its request, by the idle timeout',
      { idleTimeoutMs: BOUND },
      'GET / HTTP/1.1\r\nHost: x\r\n\r\n',
      /^HTTP\/1\.1 200 /,
    ],
  ])('%s', async (_what, limits, send, answer) => {
    const url = await serve(limits, ok);
    const closed = await Promise.all(Array.from({ length: 20 }, () => rawSocket(url, send).closed));
    for (const { ms, data } of closed) {
      expect(data).toMatch(answer);
      expect(ms).toBeGreaterThanOrEqual(BOUND - 20);
      // Node keeps a kept-alive connection 1 s past keepAliveTimeout (HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER).
      expect(ms).toBeLessThan(LATE + ('keepAliveTimeoutMs' in limits ? 1_000 : 0));
    }
  });

  it('with every limit off, a silent socket stays open (what the cases above change)', async () => {
    const url = await serve({}, ok);
    const socket = rawSocket(url);
    const outcome = await Promise.race([socket.closed, wait(BOUND + SLACK).then(() => 'open')]);
    socket.destroy();
    expect(outcome).toBe('open');
  });
});

describe('createLimitedServer does not cut a response in progress', () => {
  /** Streams `a`, then `b` and `c` each after a silence longer than every limit. */
  const silentStream =
    (gap: number): RequestListener =>
    (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('a');
        setTimeout(() => res.write('b'), gap);
        setTimeout(() => res.end('c'), 2 * gap);
      });
    };
  /** Header and request timeouts that a loaded machine's client still meets (at 200 ms its body came late: 408). */
  const REQUEST_BOUND = 1_000;

  it('streams through silences longer than the header, request, keep-alive and idle timeouts', async () => {
    const limits = {
      headersTimeoutMs: REQUEST_BOUND,
      requestTimeoutMs: REQUEST_BOUND,
      keepAliveTimeoutMs: BOUND,
      idleTimeoutMs: BOUND,
    };
    const url = await serve(limits, silentStream(REQUEST_BOUND + 3 * BOUND));
    const res = await fetch(url, { method: 'POST', body: 'prompt' });
    expect(await res.text()).toBe('abc');
  });

  it("(why idleTimeoutMs is not Node's server.timeout alone: that cuts the stream)", async () => {
    const server = createServer(silentStream(3 * BOUND));
    server.timeout = BOUND;
    servers.push(server);
    const url = await listen(server, 0, '127.0.0.1');
    const res = await fetch(url, { method: 'POST', body: 'prompt' });
    await expect(res.text()).rejects.toThrow();
  });
});

describe('createLimitedServer caps connections', () => {
  /** A listener that never answers: its connections stay busy. */
  const hold: RequestListener = (req) => void req.resume();

  it('at the cap closes the oldest connection that sent nothing, never a kept-alive one; counted', async () => {
    const shed: ShedReason[] = [];
    const url = await serve({ maxConnections: 2 }, ok, undefined, { onShed: (r) => shed.push(r) });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await getOver(agent, url, '/health')).toMatchObject({ status: 200, reused: false });
      const silent = rawSocket(url);
      const third = rawSocket(url, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      expect((await silent.closed).data).toBe(''); // closed to make room, answered nothing
      expect(shed).toEqual(['idle_evicted']);
      expect(await getOver(agent, url, '/health')).toMatchObject({ status: 200, reused: true });
      third.destroy();
    } finally {
      agent.destroy();
    }
  });

  it('refuses with a raw 503 when every connection is busy, never parsing the request; one warning', async () => {
    const warn = vi.fn();
    const shed: ShedReason[] = [];
    let served = 0;
    const url = await serve(
      { maxConnections: 1 },
      (req, res) => (served++, hold(req, res)),
      { warn } as unknown as Logger,
      { onShed: (r) => shed.push(r) },
    );
    const busy = rawSocket(url, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await vi.waitFor(() => expect(served).toBe(1)); // no event outside the listener: polled
    const refused = await rawSocket(url, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n').closed;
    expect(refused.data).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(refused.data).toContain('"code":"too_many_connections"');
    await rawSocket(url).closed;
    expect(served).toBe(1);
    expect(shed).toEqual(['cap', 'cap']);
    expect(warn.mock.calls).toEqual([
      [{ max_connections: 1, refused: 1 }, 'connection limits reached: refusing new connections with 503'],
    ]);
    busy.destroy();
  });

  it('refuses a source over maxPerSource while the cap has room', async () => {
    const shed: ShedReason[] = [];
    const url = await serve(
      { maxConnections: 100 },
      (req, res) => (req.url === '/health' ? ok : hold)(req, res),
      undefined,
      {
        maxPerSource: 2,
        onShed: (r) => shed.push(r),
      },
    );
    const held = [rawSocket(url), rawSocket(url)];
    const refused = await rawSocket(url).closed; // loopback: one source
    expect(refused.data).toMatch(/^HTTP\/1\.1 503 /);
    expect(shed).toEqual(['per_source']);
    for (const h of held) h.destroy();
    await Promise.all(held.map((h) => h.closed));
    const after = await rawSocket(url, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').closed;
    expect(after.data).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('over the cap still answers the reserved paths (up to RESERVED_CONNECTIONS), nothing else', async () => {
    const shed: ShedReason[] = [];
    let busy = 0;
    const url = await serve(
      { maxConnections: 1 },
      (req, res) => (req.url?.startsWith('/health') ? ok(req, res) : (busy++, hold(req, res))),
      undefined,
      { reservedPaths: new Set(['/health']), onShed: (r) => shed.push(r) },
    );
    const first = rawSocket(url, 'POST /work HTTP/1.1\r\nHost: x\r\ncontent-length: 1\r\n\r\nx');
    await vi.waitFor(() => expect(busy).toBe(1)); // no event outside the listener: polled
    const health = await rawSocket(
      url,
      'GET /health?probe=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    ).closed;
    expect(health.data).toMatch(/^HTTP\/1\.1 200 /);
    const other = await rawSocket(url, 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n').closed;
    expect(other.data).toMatch(/^HTTP\/1\.1 503 /);
    expect(other.data).toContain('too_many_connections');
    const reserve = Array.from({ length: RESERVED_CONNECTIONS }, () => rawSocket(url));
    const beyond = await rawSocket(url).closed;
    expect(beyond.data).toMatch(/^HTTP\/1\.1 503 /);
    expect(shed.filter((r) => r === 'reserve_only')).toEqual(['reserve_only']);
    expect(shed.filter((r) => r === 'cap')).toHaveLength(2 + RESERVED_CONNECTIONS + 1);
    expect(busy).toBe(1);
    for (const r of [first, ...reserve]) r.destroy();
  });
});
