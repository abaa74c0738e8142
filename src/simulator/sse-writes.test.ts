import { request } from 'node:http';
import { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';

/**
 * Each SSE event leaves the simulator in its own socket write, as vLLM's and SGLang's servers send
 * each yielded chunk: a client that parses every received chunk as one event (vllm-ascend's
 * proxies) must not see two events joined. The test records what the server's sockets hand to the
 * kernel (`_write` / `_writev`, one call per write request) — what a client reads can still join
 * writes when it reads late, so the writes themselves are what is checked.
 */
const serverWrites = new Map<number, Buffer[]>();
const origWrite = Socket.prototype._write;
const origWritev = Socket.prototype._writev!;
type Chunk = { chunk: Buffer | string; encoding: BufferEncoding };
function record(socket: Socket, bufs: Buffer[]): void {
  if (!(socket as Socket & { server?: unknown }).server || socket.remotePort === undefined) return;
  const all = serverWrites.get(socket.remotePort) ?? [];
  all.push(Buffer.concat(bufs));
  serverWrites.set(socket.remotePort, all);
}
const toBuf = (c: Buffer | string, enc: BufferEncoding): Buffer =>
  typeof c === 'string' ? Buffer.from(c, enc) : c;

const log = createLogger('sim-sse-writes', 'silent');
let vllm: RunningSimulator;
let ascendDecode: RunningSimulator;
let sglang: RunningSimulator;
beforeAll(async () => {
  Socket.prototype._write = function (
    this: Socket,
    chunk: Buffer | string,
    enc: BufferEncoding,
    cb: (e?: Error | null) => void,
  ) {
    record(this, [toBuf(chunk, enc)]);
    origWrite.call(this, chunk, enc, cb);
  };
  Socket.prototype._writev = function (this: Socket, chunks: Chunk[], cb: (e?: Error | null) => void) {
    record(
      this,
      chunks.map((c) => toBuf(c.chunk, c.encoding)),
    );
    origWritev.call(this, chunks, cb);
  };
  [vllm, ascendDecode, sglang] = await Promise.all([
    startSimulator({ timeScale: 0 }, log),
    startSimulator({ timeScale: 0, engine: 'vllm-ascend', engineVersion: 'v0.13', role: 'decode' }, log),
    startSimulator({ timeScale: 0, engine: 'sglang' }, log),
  ]);
});
afterAll(async () => {
  Socket.prototype._write = origWrite;
  Socket.prototype._writev = origWritev;
  await Promise.all([vllm.close(), ascendDecode.close(), sglang.close()]);
});

/** POSTs on a fresh connection; resolves with the server's writes of that response once it ended. */
function writesOf(base: string, path: string, body: unknown): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const u = new URL(base + path);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(serverWrites.get(req.socket!.localPort!) ?? []));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** The SSE payload of each write (HTTP head and chunked framing removed); one entry per write. */
function eventsPerWrite(writes: Buffer[]): string[] {
  const out: string[] = [];
  for (const [i, w] of writes.entries()) {
    let s = w.toString('utf8');
    if (i === 0) s = s.slice(s.indexOf('\r\n\r\n') + 4);
    if (s === '0\r\n\r\n') continue; // the chunked terminator
    const m = /^([0-9a-f]+)\r\n([\s\S]*)\r\n$/.exec(s);
    if (m === null) throw new Error(`write ${i} is not one HTTP chunk: ${JSON.stringify(s.slice(0, 120))}`);
    expect(Buffer.byteLength(m[2]!)).toBe(parseInt(m[1]!, 16));
    out.push(m[2]!);
  }
  return out;
}

const ONE_EVENT = /^data: [^\n]+\n\n$/;
const chat = (extra: Record<string, unknown>) => ({
  model: 'motor-sim-7b',
  messages: [{ role: 'user', content: 'Use get_weather for Paris' }],
  stream: true,
  ...extra,
});
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

describe('each SSE event is its own socket write', () => {
  it.each<[string, () => RunningSimulator, string, Record<string, unknown>, number]>([
    [
      'chat, usage chunk',
      () => vllm,
      '/v1/chat/completions',
      chat({ max_tokens: 8, stream_options: { include_usage: true } }),
      1 + 8 + 1 + 1,
    ],
    ['chat, tool call', () => vllm, '/v1/chat/completions', chat({ tools: TOOLS }), 0],
    [
      'completions',
      () => vllm,
      '/v1/completions',
      { model: 'motor-sim-7b', prompt: 'hello there', max_tokens: 8, stream: true },
      8 + 1,
    ],
    [
      'vllm-ascend recompute: the "recomputed" event and [DONE]',
      () => ascendDecode,
      '/v1/chat/completions',
      chat({ max_tokens: 8 }),
      1 + 3 + 1 + 1, // role, 3 tokens, v0.13's frame repeating the last token, [DONE]
    ],
    [
      'SGLang /generate',
      () => sglang,
      '/generate',
      { text: 'hello there', sampling_params: { max_new_tokens: 6 }, stream: true },
      6 + 1,
    ],
  ])('%s', async (_name, sim, path, body, expectedEvents) => {
    if (sim() === ascendDecode)
      await fetch(`${ascendDecode.url}/debug/faults`, {
        method: 'POST',
        body: JSON.stringify({ recompute_after: 3 }),
      });
    const events = eventsPerWrite(await writesOf(sim().url, path, body));
    for (const e of events) expect(e).toMatch(ONE_EVENT);
    expect(events.at(-1)).toBe('data: [DONE]\n\n');
    if (expectedEvents > 0) expect(events).toHaveLength(expectedEvents);
    if (sim() === ascendDecode) expect(events.at(-2)).toContain('"stop_reason":"recomputed"');
  });

  it.each([
    ['vLLM', () => vllm],
    ['SGLang (with the usage chunk)', () => sglang],
  ])('%s early error frame: the error event, then [DONE]', async (_name, sim) => {
    await fetch(`${sim().url}/debug/faults`, {
      method: 'POST',
      body: JSON.stringify({ stream_error_first: 1 }),
    });
    const events = eventsPerWrite(
      await writesOf(sim().url, '/v1/chat/completions', chat({ stream_options: { include_usage: true } })),
    );
    for (const e of events) expect(e).toMatch(ONE_EVENT);
    expect(events[0]).toContain('"error"');
    expect(events.at(-1)).toBe('data: [DONE]\n\n');
    expect(events).toHaveLength(sim() === sglang ? 3 : 2);
  });
});
