import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import type { RequestListener } from '../common/request-drain.js';
import { METASERVER_ROUTE_PREFIX as PREFIX } from '../coordinator/gateway/gateway.js';
import { METASERVER_MAX_BODY_BYTES } from '../coordinator/gateway/metaserver-route.js';

/** The token of a `POST /v1/metaserver/<token>` call, else null. */
export function metaserverToken(req: Pick<IncomingMessage, 'method' | 'url'>): string | null {
  const url = req.url ?? '';
  if (req.method !== 'POST' || !url.startsWith(PREFIX)) return null;
  const end = url.slice(PREFIX.length).search(/[/?#]/);
  return end === -1 ? url.slice(PREFIX.length) : url.slice(PREFIX.length, PREFIX.length + end);
}

/**
 * The direct-trigger metaserver across workers. A pending attempt lives in the worker that started
 * it, but the decode engine's call to `<publicUrl>/v1/metaserver/<token>` reaches whichever worker
 * the primary hands its connection to. A worker that does not hold the token buffers the call's body
 * (bounded as the route bounds it) and passes it to the other workers' private loopback listeners in
 * turn: the route answers an unknown token 404 without reading the body or touching any state, so
 * the first answer that is not a 404 comes from the owner and is relayed as it is.
 */
export class MetaserverForwarder {
  private peerPorts: readonly number[] = [];
  private readonly pools = new Map<number, Pool>();
  private server: Server | null = null;

  /** Other workers' private ports (the primary sends them as workers come and go). */
  setPeers(ports: readonly number[]): void {
    this.peerPorts = ports;
    for (const [port, pool] of this.pools)
      if (!ports.includes(port)) {
        this.pools.delete(port);
        void pool.close();
      }
  }

  /** The gateway listener with cross-worker metaserver calls (startCoordinator's `frontGateway`). */
  front(gateway: RequestListener, ownsTrigger: (token: string) => boolean): RequestListener {
    return (req, res) => {
      const token = metaserverToken(req);
      if (token === null || ownsTrigger(token) || this.peerPorts.length === 0) return gateway(req, res);
      void this.forward(req, res, gateway);
    };
  }

  /** Serves `gateway`'s metaserver route (only) on a loopback port of this worker alone; resolves with it. */
  async listen(gateway: RequestListener): Promise<number> {
    const server = createServer((req, res) => {
      if (metaserverToken(req) === null) {
        res.writeHead(404, { connection: 'close' }).end();
        return;
      }
      gateway(req, res);
    });
    this.server = server;
    // exclusive: a port of its own, not one the cluster's primary would share among the workers
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async forward(req: IncomingMessage, res: ServerResponse, gateway: RequestListener): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        // too large for the route anyway: the owner could not have served it either
        if (size > METASERVER_MAX_BODY_BYTES) return void res.writeHead(413, { connection: 'close' }).end();
        chunks.push(chunk);
      }
    } catch {
      return; // the caller went away
    }
    const body = Buffer.concat(chunks);
    let last: { status: number; type: string; text: string } | null = null;
    for (const port of this.peerPorts) {
      try {
        const answer = await this.pool(port).request({
          method: 'POST',
          path: req.url!,
          headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
          body,
        });
        const text = await answer.body.text();
        last = { status: answer.statusCode, type: String(answer.headers['content-type'] ?? ''), text };
        if (answer.statusCode !== 404) break;
      } catch {
        // a worker that just exited: its attempts went with it
      }
    }
    if (last === null) return gateway(req, res); // no peer answered: this worker's own 404
    res.writeHead(last.status, last.type ? { 'content-type': last.type } : {});
    res.end(last.text);
  }

  private pool(port: number): Pool {
    let pool = this.pools.get(port);
    if (!pool) this.pools.set(port, (pool = new Pool(`http://127.0.0.1:${port}`, { connections: 8 })));
    return pool;
  }
}
