import { createServer, type Server, type ServerResponse } from 'node:http';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from './http.js';
import { RequestDrain } from './request-drain.js';

/** A server whose requests stay open until the test ends them; `started` resolves per request. */
async function holdingServer(drain: RequestDrain) {
  const held: ServerResponse[] = [];
  let arrived: (() => void) | null = null;
  const server: Server = createServer(
    drain.track(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('started\n');
        held.push(res);
        arrived?.();
      },
      (_req, res) => {
        res.writeHead(503, { connection: 'close' });
        res.end('closing');
      },
    ),
  );
  const url = await listen(server, 0, '127.0.0.1');
  const open = async () => {
    const got = new Promise<void>((resolve) => (arrived = resolve));
    const res = await request(url);
    await got;
    return res;
  };
  return { server, url, held, open };
}

describe('RequestDrain', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => closeServer(s)));
  });

  it('closes at once with nothing in flight, and refuses what comes after', async () => {
    const drain = new RequestDrain();
    const h = await holdingServer(drain);
    servers.push(h.server);
    await drain.close(60_000);
    const res = await request(h.url);
    expect([res.statusCode, await res.body.text()]).toEqual([503, 'closing']);
    expect(drain.inFlight).toBe(0);
  });

  it.each([
    ['ends within the grace', 60_000, 'finished'],
    ['outlives the grace', 20, 'cut'],
    ['is cut at once (grace 0)', 0, 'cut'],
  ] as const)('a request in flight that %s is %s', async (_name, graceMs, expected) => {
    const drain = new RequestDrain();
    const h = await holdingServer(drain);
    servers.push(h.server);
    const res = await h.open();
    expect(drain.inFlight).toBe(1);
    const body = res.body.text().then(
      (text) => `finished:${text}`,
      () => 'cut',
    );
    const closed = drain.close(graceMs);
    // while draining, a new request is refused and the one in flight goes on
    const late = await request(h.url);
    expect(late.statusCode).toBe(503);
    await late.body.dump();
    if (expected === 'finished') h.held[0]!.end('done\n');
    await closed;
    expect(drain.inFlight).toBe(0);
    expect(await body).toBe(expected === 'finished' ? 'finished:started\ndone\n' : 'cut');
  });
});
