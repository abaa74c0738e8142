import { request, type Agent } from 'node:http';
import { connect } from 'node:net';

/** Short server-side bounds for listener tests (ms): idle sockets close within about BOUND. */
export const BOUND = 200;
/**
 * What a socket closed within `BOUND` is told apart from: the server defaults' shortest close (the
 * 20 s header timeout). An upper bound of BOUND + a few hundred ms was missed at load 20; this one is
 * 4× under the default yet far above a loaded machine's timer lag.
 */
export const SERVER_DEFAULT_BOUND = 5_000;
export const LIMITS = {
  headersTimeoutMs: BOUND,
  requestTimeoutMs: 1_000,
  keepAliveTimeoutMs: BOUND,
  idleTimeoutMs: BOUND,
};

export interface ClosedSocket {
  /** From connect to the server closing it (ms). */
  ms: number;
  /** Everything the server sent. */
  data: string;
}

/**
 * Connects to `url`, optionally writes `send`, then stays silent; resolves once the server closes it.
 * `paused`: never reads either (a client that stops reading: the server's writes back up); `data` stays empty.
 */
export function rawSocket(
  url: string,
  send?: string,
  opts: { paused?: boolean } = {},
): { closed: Promise<ClosedSocket>; destroy(): void } {
  const { hostname, port } = new URL(url);
  const t0 = performance.now();
  const socket = connect(Number(port), hostname);
  if (send !== undefined) socket.write(send);
  let data = '';
  socket.setEncoding('utf8');
  if (opts.paused) socket.pause();
  else socket.on('data', (chunk: string) => (data += chunk));
  socket.on('error', () => {});
  const closed = new Promise<ClosedSocket>((resolve) => {
    socket.on('close', () => resolve({ ms: performance.now() - t0, data }));
  });
  return { closed, destroy: () => socket.destroy() };
}

/** `n` silent sockets; resolves with each one's life once the server has closed them all. */
export function silentSockets(url: string, n: number): Promise<ClosedSocket[]> {
  return Promise.all(Array.from({ length: n }, () => rawSocket(url).closed));
}

/** GET `path` over `agent`; the status, the body and whether the agent reused a kept-alive socket. */
export function getOver(
  agent: Agent,
  url: string,
  path: string,
): Promise<{ status: number; body: string; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end();
  });
}
