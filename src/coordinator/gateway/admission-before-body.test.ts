import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from '../coordinator.js';

/**
 * Issue 15 findings 2 and 7: request bodies are admitted before they are read (their bytes counted
 * against `server.maxInflightBodyBytes`), JSON is bounded in keys before it is parsed, and a flood of
 * unauthenticated multi-MiB metaserver calls reads nothing. The engine is a loopback fake that holds
 * every call until the test opens its gate, and records the admission counters when called.
 */

const MiB = 1024 * 1024;
const quiet = () => createLogger('admission-before-body-test', 'silent');

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Engine {
  url: string;
  /** Calls received so far, and the coordinator's counted body bytes at each. */
  calls: number;
  countedAtCall: number[];
  /** Lets every held call (and each later one) answer. */
  open(): void;
  /** Resolves when `n` calls are being held. */
  held(n: number): Promise<void>;
}

/** A fake OpenAI engine answering a one-token chat completion once its gate is open. */
async function fakeEngine(counted: () => number): Promise<Engine> {
  let opened: () => void = () => {};
  const gate = new Promise<void>((resolve) => (opened = resolve));
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const engine: Engine = {
    url: '',
    calls: 0,
    countedAtCall: [],
    open: () => opened(),
    held: (n) =>
      engine.calls >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
  };
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET') {
      const models = { object: 'list', data: [{ id: 'm', object: 'model' }] };
      return void res.writeHead(req.url === '/v1/models' ? 200 : 404).end(JSON.stringify(models));
    }
    req.resume();
    engine.calls += 1;
    engine.countedAtCall.push(counted());
    for (const w of waiters.splice(0)) (engine.calls >= w.n ? w.resolve : () => waiters.push(w))();
    void gate.then(() => {
      const body = {
        id: 'c',
        object: 'chat.completion',
        model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'length' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return engine;
}

/** A coordinator over one fake engine (direct, union) with `server` and `scheduling.admission` settings. */
async function fleet(
  server: Record<string, unknown>,
  admission: Record<string, unknown> = {},
): Promise<{ coordinator: RunningCoordinator; engine: Engine }> {
  const started: { coordinator?: RunningCoordinator } = {};
  const engine = await fakeEngine(() => started.coordinator!.scheduling.admission.inflightBodyBytes);
  const config = validateCoordinatorConfig(
    {
      server: { port: 0, ...server },
      scheduling: { admission },
      health: { intervalMs: 0 },
      instances: [{ url: engine.url, role: 'union', mode: 'direct', models: ['m'] }],
    },
    {},
  );
  const coordinator = await startCoordinator(config, quiet());
  started.coordinator = coordinator;
  closers.push(() => coordinator.close());
  return { coordinator, engine };
}

interface Answer {
  status: number;
  body: string;
  headers: IncomingMessage['headers'];
}

/**
 * POSTs `body` (with `content-length`, or chunked in `chunks` writes) and resolves with the answer,
 * even when the server answers before reading the body and closes (the upload's EPIPE is ignored).
 */
function postBody(
  url: string,
  path: string,
  body: Buffer,
  chunks?: number,
  apiKey?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (chunks === undefined) headers['content-length'] = body.length;
    if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`;
    let answered = false;
    const req = request(new URL(path, url), { method: 'POST', headers, agent: false }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
    });
    req.on('error', (err) => (answered ? undefined : reject(err)));
    if (chunks === undefined) return void req.end(body);
    const size = Math.ceil(body.length / chunks);
    for (let at = 0; at < body.length; at += size) req.write(body.subarray(at, at + size));
    req.end();
  });
}

/**
 * A raw POST declaring `declared` body bytes that sends its headers and the body's first 100 bytes,
 * then nothing; `answer` is everything the server sent until it closed.
 */
function slowUpload(
  url: string,
  declared: number,
  apiKey?: string,
): { socket: Socket; answer: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const auth = apiKey === undefined ? '' : `Authorization: Bearer ${apiKey}\r\n`;
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
      `Content-Length: ${declared}\r\n\r\n` +
      chatOfBytes(declared).subarray(0, 100).toString(),
  );
  let data = '';
  socket.setEncoding('utf8');
  socket.on('data', (c: string) => (data += c));
  socket.on('error', () => {});
  return { socket, answer: new Promise((resolve) => socket.on('close', () => resolve(data))) };
}

/** A chat body of exactly `bytes` bytes (one long user message). */
function chatOfBytes(bytes: number): Buffer {
  const head = '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return Buffer.from(head + 'x'.repeat(bytes - head.length - tail.length) + tail);
}

/** The status of `GET path`. */
function getStatus(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(new URL(path, url), { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

/** Resolves once `n` of `answers` have settled. */
function settled<T>(answers: Array<Promise<T>>, n: number): Promise<void> {
  let count = 0;
  return new Promise((resolve) => {
    for (const a of answers) void a.finally(() => ++count === n && resolve());
  });
}

const code = (a: Answer): unknown => (JSON.parse(a.body) as { error: { code: unknown } }).error.code;

/** 4 MiB bodies reserved whole at admission, one client may use all of the budget: the queueing cases. */
const WHOLE_DECLARED = { maxBodyBytes: 4 * MiB, bodyReservationBytes: 4 * MiB, clientBodyShare: 1 };

describe('admission before the body is read (server.maxInflightBodyBytes)', { timeout: 60_000 }, () => {
  it('50 concurrent 4 MiB bodies: never more than the budget counted at once, all served in turn', async () => {
    const { coordinator, engine } = await fleet(
      { ...WHOLE_DECLARED, maxInflightBodyBytes: 16 * MiB },
      { maxQueue: 100 },
    );
    const body = chatOfBytes(4 * MiB);
    const answers = Promise.all(
      Array.from({ length: 50 }, () => postBody(coordinator.url, '/v1/chat/completions', body)),
    );
    await engine.held(4);
    // 4 bodies fill the budget: the other 46 wait in the admission queue, unread (no event: polled)
    await vi.waitFor(() => expect(coordinator.scheduling.admission.queued).toBe(46), { timeout: 30_000 });
    expect(coordinator.scheduling.admission.inflightBodyBytes).toBe(16 * MiB);
    expect(engine.calls).toBe(4);
    engine.open();
    const done = await answers;
    expect(done.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect(engine.calls).toBe(50);
    expect(Math.max(...engine.countedAtCall)).toBeLessThanOrEqual(16 * MiB);
    expect(coordinator.scheduling.admission.inflightBodyBytes).toBe(0);
  });

  it('with no queue, the bodies that do not fit are refused 503 before they are read', async () => {
    const { coordinator, engine } = await fleet(
      { ...WHOLE_DECLARED, maxInflightBodyBytes: 16 * MiB },
      { maxQueue: 0 },
    );
    const body = chatOfBytes(4 * MiB);
    const answers = Array.from({ length: 50 }, () => postBody(coordinator.url, '/v1/chat/completions', body));
    // the engine holds the 4 admitted ones: the 46 others are answered first
    await settled(answers, 46);
    expect(engine.calls).toBe(4);
    engine.open();
    const done = await Promise.all(answers);
    const refused = done.filter((a) => a.status === 503);
    expect(refused).toHaveLength(46);
    for (const a of refused) {
      expect(code(a)).toBe('overloaded');
      expect(a.headers.connection).toBe('close');
      expect(a.headers['retry-after']).toBe('1');
    }
    expect(coordinator.scheduling.admission.rejections.queue_full).toBe(refused.length);
    expect(Math.max(...engine.countedAtCall)).toBeLessThanOrEqual(16 * MiB);
  });

  it('a chunked body is counted as it arrives: one outgrowing the budget is refused 503', async () => {
    const { coordinator, engine } = await fleet({ ...WHOLE_DECLARED, maxInflightBodyBytes: 6 * MiB });
    const first = postBody(coordinator.url, '/v1/chat/completions', chatOfBytes(4 * MiB), 8);
    await engine.held(1);
    expect(coordinator.scheduling.admission.inflightBodyBytes).toBe(4 * MiB);
    const second = await postBody(coordinator.url, '/v1/chat/completions', chatOfBytes(4 * MiB), 64);
    expect(second.status).toBe(503);
    expect(code(second)).toBe('overloaded');
    expect(second.body).toContain('server.maxInflightBodyBytes');
    expect(coordinator.scheduling.admission.rejections.body_budget).toBe(1);
    engine.open();
    expect((await first).status).toBe(200);
    expect(coordinator.scheduling.admission.inflightBodyBytes).toBe(0);
  });

  it('40 slow uploaders declaring 4 MiB each hold what they sent plus a reservation: another client is admitted at once', async () => {
    const { coordinator, engine } = await fleet({
      maxBodyBytes: 4 * MiB,
      maxInflightBodyBytes: 16 * MiB,
      apiKeys: ['slow', 'other'],
      minUploadBytesPerSecond: 0, // the reservation alone is under test
    });
    engine.open();
    const admission = coordinator.scheduling.admission;
    const slow = Array.from({ length: 40 }, () => slowUpload(coordinator.url, 4 * MiB, 'slow'));
    await vi.waitFor(() => expect(admission.inFlight).toBe(40), { timeout: 30_000 }); // no event: polled
    expect(admission.inflightBodyBytes).toBeLessThanOrEqual(40 * (64 * 1024 + 100));
    const other = await postBody(
      coordinator.url,
      '/v1/chat/completions',
      chatOfBytes(4 * MiB),
      undefined,
      'other',
    );
    expect(other.status, other.body).toBe(200);
    expect(engine.countedAtCall).toHaveLength(1);
    expect(admission.rejections.queue_timeout).toBe(0);
    for (const s of slow) s.socket.destroy();
  });

  it('one client cannot take more than its share of the budget: 429, the others are served', async () => {
    const { coordinator, engine } = await fleet({
      maxBodyBytes: 4 * MiB,
      maxInflightBodyBytes: 16 * MiB,
      bodyReservationBytes: 4 * MiB,
      apiKeys: ['greedy', 'other'],
      minUploadBytesPerSecond: 0,
    });
    engine.open();
    const admission = coordinator.scheduling.admission;
    const held = slowUpload(coordinator.url, 4 * MiB, 'greedy'); // the whole 4 MiB share (0.25 × 16 MiB)
    await vi.waitFor(() => expect(admission.inFlight).toBe(1), { timeout: 30_000 }); // no event: polled
    const refused = await postBody(
      coordinator.url,
      '/v1/chat/completions',
      chatOfBytes(1024),
      undefined,
      'greedy',
    );
    expect(refused.status, refused.body).toBe(429);
    expect(code(refused)).toBe('rate_limited');
    expect(refused.headers['retry-after']).toBe('1');
    const other = await postBody(
      coordinator.url,
      '/v1/chat/completions',
      chatOfBytes(4 * MiB),
      undefined,
      'other',
    );
    expect(other.status, other.body).toBe(200);
    expect(admission.rejections.client_body_share).toBe(1);
    held.socket.destroy();
  });

  it('an upload slower than server.minUploadBytesPerSecond is cut 408, counted, its budget returned at once', async () => {
    const { coordinator } = await fleet({
      maxBodyBytes: 4 * MiB,
      minUploadBytesPerSecond: 1024,
      uploadRateWindowMs: 200,
    });
    const admission = coordinator.scheduling.admission;
    const slow = slowUpload(coordinator.url, 4 * MiB);
    const answer = await slow.answer; // its first bytes are all it ever sends
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"upload_too_slow"');
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(admission.inflightBodyBytes).toBe(0);
    expect(admission.inFlight).toBe(0);
    const metrics = await coordinator.observability.metrics.registry.metrics();
    expect(metrics).toMatch(/motor_requests_total\{[^}]*outcome="upload_too_slow"[^}]*\} 1/);
  });

  it('refuses a body with 259k keys 413 before it is parsed (server.maxJsonKeys)', async () => {
    const { coordinator, engine } = await fleet({});
    let keys = '';
    for (let i = 0; i < 259_000; i++) keys += `,"k${i}":1`;
    const body = Buffer.from(`{"model":"m","messages":[{"role":"user","content":"hi"}]${keys}}`);
    expect(body.length).toBeLessThan(4 * MiB); // under the byte limit: only the key bound refuses it
    const answer = await postBody(coordinator.url, '/v1/chat/completions', body);
    expect(answer.status).toBe(413);
    expect(code(answer)).toBe('body_too_large');
    expect(answer.body).toContain('more than 32768 JSON keys (server.maxJsonKeys)');
    expect(engine.calls).toBe(0);
  });
});

describe('server body limits config', () => {
  it.each<[Record<string, unknown>, RegExp | null]>([
    [{}, null],
    [
      { maxBodyBytes: 8 * MiB, maxInflightBodyBytes: 4 * MiB },
      /server\.maxInflightBodyBytes.*at least maxBodyBytes/,
    ],
    [{ maxJsonKeys: 0 }, /server\.maxJsonKeys/],
  ])('%j', (server, problem) => {
    const validate = () => validateCoordinatorConfig({ server }, {});
    if (problem === null)
      expect(validate().server).toMatchObject({ maxJsonKeys: 32_768, maxInflightBodyBytes: 128 * MiB });
    else expect(validate).toThrow(problem);
  });
});

describe(
  'a flood of unauthenticated multi-MiB metaserver calls (issue 15 finding 2)',
  { timeout: 60_000 },
  () => {
    it('reads none of them: 404s, nothing counted, /health and a chat served meanwhile', async () => {
      const { coordinator, engine } = await fleet({ apiKeys: ['k'] });
      engine.open();
      const { hostname, port } = new URL(coordinator.url);
      const payload = Buffer.alloc(3.8 * MiB, 'x');
      const rssBefore = process.memoryUsage().rss;
      const flood = Array.from({ length: 150 }, (_, i) => {
        const socket = connect(Number(port), hostname);
        socket.write(
          `POST /v1/metaserver/${String(i).padStart(22, 'A')} HTTP/1.1\r\nHost: x\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`,
        );
        socket.write(payload);
        let data = '';
        socket.setEncoding('utf8');
        socket.on('data', (c: string) => (data += c));
        socket.on('error', () => {});
        return new Promise<string>((resolve) => socket.on('close', () => resolve(data)));
      });
      const health = await getStatus(coordinator.url, '/health');
      const chat = await postBody(coordinator.url, '/v1/chat/completions', chatOfBytes(1024), undefined, 'k');
      const answers = await Promise.all(flood);
      expect(health).toBe(200);
      expect(chat.status).toBe(200);
      for (const data of answers) expect(data).toMatch(/^$|^HTTP\/1\.1 404 /); // reset before reading it, or 404
      expect(answers.filter((d) => d.startsWith('HTTP/1.1 404')).length).toBeGreaterThan(0);
      expect(engine.countedAtCall).toEqual([1024]); // the chat's body alone was counted
      // 150 × 3.8 MiB buffered would be 570 MiB
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * MiB);
    });
  },
);
