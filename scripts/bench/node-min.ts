/**
 * The floor of a Node.js proxy, for bench:overhead (issue 19): what `http.createServer` + undici cost
 * with nothing else in the way, so the report can say how much of Motor's added latency is Node's.
 *   single <upstream>          target `node-min`: the request body piped to the engine unparsed, the
 *                              answer piped back (status, content-type, content-length, streaming).
 *   pd <prefill> <decode>      target `node-min-pd`: parse the body, post the prefill leg, parse its
 *                              answer, post the decode leg with its kv_transfer_params (pd-legs.ts),
 *                              pipe the decode answer back.
 * Run as `node --import tsx scripts/bench/node-min.ts …` (one process, so /proc/<pid> is the proxy);
 * prints one JSON line with `"listening"` and its url on stdout, as `motor` does.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Pool, type Dispatcher } from 'undici';
import { decodeLeg, engineRequestId, prefillLeg } from './pd-legs.js';

const [mode, first, second] = process.argv.slice(2);
if (!first || (mode !== 'single' && mode !== 'pd') || (mode === 'pd' && !second)) {
  console.error('usage: node-min.ts single <upstream> | pd <prefill> <decode>');
  process.exit(2);
}
// as many connections as Motor's bench config gives each instance (upstream.connectionsPerInstance)
const pool = (url: string): Pool => new Pool(url, { connections: 2048 });
const upstream = pool(first);
const decode = mode === 'pd' ? pool(second!) : null;

const headersOf = (r: Dispatcher.ResponseData): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const name of ['content-type', 'content-length']) {
    const v = r.headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  return out;
};
async function relay(r: Dispatcher.ResponseData, res: ServerResponse): Promise<void> {
  res.writeHead(r.statusCode, headersOf(r));
  await pipeline(r.body, res);
}

async function single(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'content-length']) {
    const v = req.headers[name];
    if (typeof v === 'string') headers[name] = v;
  }
  await relay(await upstream.request({ method: 'POST', path: req.url ?? '/', headers, body: req }), res);
}

async function pd(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  const id = engineRequestId();
  const path = req.url ?? '/';
  const pre = await upstream.request(prefillLeg(body, id, path));
  const answer: unknown = await pre.body.json();
  if (pre.statusCode !== 200) {
    res.writeHead(pre.statusCode, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    return;
  }
  await relay(await decode!.request(decodeLeg(body, id, path, answer)), res);
}

const handle = mode === 'pd' ? pd : single;
const server = createServer((req, res) => {
  handle(req, res).catch((err: unknown) => {
    if (res.headersSent) res.destroy();
    else res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}` }));
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void Promise.all([upstream.destroy(), decode?.destroy()]).then(() => process.exit(0));
});
