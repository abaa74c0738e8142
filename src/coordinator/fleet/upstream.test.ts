import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyLength, UpstreamAbort, Upstreams, type UpstreamBody } from './upstream.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

describe('Upstreams.request bodies on the wire', () => {
  const received: Received[] = [];
  let stalled: (() => void) | null = null;
  const server = createServer((req, res) => {
    if (req.url === '/stall') {
      req.pause(); // never reads: the upload fills the socket buffers and waits for a drain
      stalled?.();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.end('{}');
    });
  });
  const upstreams = new Upstreams({ connectionsPerInstance: 2, keepAliveMs: 10_000, connectMs: 1_000 });
  let instance = { id: 'e', url: '' };

  beforeAll(async () => {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    instance = { id: 'e', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  });
  afterAll(async () => {
    await upstreams.close();
    server.close();
  });

  // a spliced leg: views of one client buffer with small pieces between them (json-splice.ts)
  const client = Buffer.from(`{"model":"m","messages":"${'é'.repeat(100_000)}","n":1,"top_p":1}`);
  const views = (end: number): Buffer[] => [
    client.subarray(0, end),
    Buffer.from(',"stream":false'),
    client.subarray(end, client.length - 1),
    Buffer.from(',"kv_transfer_params":{"do_remote_decode":true}}'),
  ];
  it.each<[string, UpstreamBody]>([
    ['a long list, sent as it is', views(client.length - 20)],
    ['a short list, joined first', views(11).map((part) => part.subarray(0, 40))],
    ['a list of one buffer', [client]],
    ['a Buffer', client],
    ['a string (its length counts characters)', client.toString()],
  ])('%s: the bytes as joined, under their content-length, twice (a retry resends it)', async (_n, body) => {
    const joined =
      typeof body === 'string' || Buffer.isBuffer(body) ? Buffer.from(body) : Buffer.concat(body);
    received.length = 0;
    for (let i = 0; i < 2; i++) {
      const res = await upstreams.request(instance, { path: '/v1/chat/completions', body });
      await res.body.text();
    }
    expect(received).toHaveLength(2);
    for (const { headers, body: got } of received) {
      expect(got.equals(joined)).toBe(true);
      expect(headers['content-length']).toBe(String(joined.length));
      expect(headers['transfer-encoding']).toBeUndefined();
      expect(headers['content-type']).toBe('application/json');
    }
    expect(bodyLength(body)).toBe(typeof body === 'string' ? body.length : joined.length);
  });

  it('a list body cut mid-upload by an abort fails the request; the pool serves the next one', async () => {
    const big = Buffer.alloc(8 * 1024 * 1024, 0x20);
    const body = [big.subarray(0, 4096), big.subarray(4096), Buffer.from('{}')];
    const arrived = new Promise<void>((r) => (stalled = r));
    const ctl = new UpstreamAbort();
    const cut = upstreams.request(instance, { path: '/stall', body, signal: ctl });
    await arrived;
    ctl.abort();
    await expect(cut).rejects.toThrow();
    received.length = 0;
    const res = await upstreams.request(instance, { path: '/v1/chat/completions', body: [client, client] });
    await res.body.text();
    expect(received[0]!.body.length).toBe(2 * client.length);
  });
});
