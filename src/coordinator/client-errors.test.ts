import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../common/http.js';
import { createLogger } from '../common/logger.js';
import { validateCoordinatorConfig } from '../config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from './coordinator.js';
import { ENGINE_PROXY_DEFAULTS } from '../engine-proxy/options.js';
import { startEngineProxy } from '../engine-proxy/server.js';
import { UPLOAD_REFUSAL_MIN_CHARS } from '../common/upload-refusal.js';

/**
 * Issue 15 finding 6: only instance faults reach breakers and health. Real loopback engines that
 * refuse a large upload the ways an engine does (413 then close; a reset before any answer; a 413
 * whose body breaks off) must not open the instance's circuit nor take it out of health; an engine
 * 500 or a reset of a small request still does.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** How the fake engine answers a POST once it has read 64 KiB of it (or all of a smaller one). */
type Answer = '413-close' | 'reset' | '413-cut' | '500';

const REFUSAL = '{"error":{"message":"request body exceeds 4194304 bytes"}}';

async function engine(answer: Answer): Promise<string> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{}');
    }
    let seen = 0;
    let done = false;
    const act = (): void => {
      if (done) return;
      done = true;
      req.pause();
      const headers = { 'content-type': 'application/json', connection: 'close' };
      if (answer === 'reset') return void req.socket.resetAndDestroy();
      if (answer === '500') {
        res.writeHead(500, headers);
        return void res.end('{"error":{"message":"engine crashed"}}');
      }
      if (answer === '413-cut') {
        // the status line and half the body, then a reset
        res.writeHead(413, { ...headers, 'content-length': Buffer.byteLength(REFUSAL) });
        return void res.write(REFUSAL.slice(0, 20), () => req.socket.resetAndDestroy());
      }
      res.writeHead(413, { ...headers, 'content-length': Buffer.byteLength(REFUSAL) });
      res.end(REFUSAL, () => req.socket.destroy());
    };
    req.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen >= 65_536) act();
    });
    req.on('end', act);
  });
  const url = await listen(server, 0, '127.0.0.1');
  closers.push(() => closeServer(server));
  return url;
}

/** An engine proxy (union role) in front of `engineUrl`. */
async function proxy(engineUrl: string): Promise<string> {
  const running = await startEngineProxy(
    {
      ...ENGINE_PROXY_DEFAULTS,
      engineUrl,
      role: 'union',
      engine: 'vllm',
      dispatchCapabilities: [],
      dispatchProfile: 'handoff',
      bootstrapHost: null,
      bootstrapPort: null,
      peerAllow: [],
    },
    createLogger('client-errors-proxy', 'silent'),
  );
  closers.push(() => running.close());
  return running.url;
}

async function coordinator(
  url: string,
  maxBodyBytes = 4 * 1024 * 1024,
  mode: 'direct' | 'proxy' = 'direct',
  instanceErrorsToClients = true,
): Promise<RunningCoordinator> {
  const config = validateCoordinatorConfig({
    server: { port: 0, maxBodyBytes, instanceErrorsToClients },
    instances: [{ id: 'e0', url, role: 'union', mode }],
    health: { intervalMs: 0, unhealthyAfter: 2 },
    retry: { maxAttempts: 1 },
    scheduling: { circuitBreaker: { failureThreshold: 2 } },
    observability: { accessLog: false, metrics: false, dashboard: false },
    management: { port: null },
  });
  const running = await startCoordinator(config, createLogger('client-errors-test', 'silent'));
  closers.push(() => running.close());
  return running;
}

interface Reply {
  status: number;
  code: unknown;
  message: string;
}

async function chat(url: string, promptChars: number): Promise<Reply> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(promptChars) }] }),
  });
  const text = await res.text();
  const error = (JSON.parse(text) as { error?: { code?: unknown; message?: string } }).error;
  return { status: res.status, code: error?.code, message: error?.message ?? text };
}

const LARGE = UPLOAD_REFUSAL_MIN_CHARS + 500_000;

describe('client-side engine errors are not charged to the instance', () => {
  it.each([
    [
      '413 then close during the upload: both limits named (finding 10)',
      '413-close',
      413,
      /single engine e0 refused the \d+-character leg body.*request body exceeds 4194304 bytes.*Motor's own limit \(server\.maxBodyBytes\)/,
    ],
    [
      'a reset during the upload, no answer',
      'reset',
      413,
      /closed the connection while receiving.*server\.maxBodyBytes/,
    ],
    ['a 413 whose body breaks off', '413-cut', 413, /engine answered 413.*server\.maxBodyBytes/],
  ] as const)(
    '%s: the client gets a 413; breaker closed, health unchanged',
    async (_name, answer, status, message) => {
      const c = await coordinator(await engine(answer));
      const replies = await Promise.all(Array.from({ length: 6 }, () => chat(c.url, LARGE)));
      for (const r of replies) {
        expect(r.status, r.message).toBe(status);
        expect(r.message).toMatch(message);
      }
      expect(c.scheduling.scheduler.breakers.state('e0')).toBe('closed');
      expect(c.controlPlane!.health.isHealthy('e0')).toBe(true);
    },
  );

  it('proxy mode: a reset during the engine upload is a 413 from the proxy; breaker closed, health unchanged', async () => {
    const c = await coordinator(await proxy(await engine('reset')), undefined, 'proxy');
    const replies = await Promise.all(Array.from({ length: 6 }, () => chat(c.url, LARGE)));
    for (const r of replies) {
      expect(r.status, r.message).toBe(413);
      expect(r.message).toMatch(/closed the connection while receiving.*over the engine's own size limit/);
    }
    expect(c.scheduling.scheduler.breakers.state('e0')).toBe('closed');
    expect(c.controlPlane!.health.isHealthy('e0')).toBe(true);
  });

  it.each([
    ['an engine 500', '500', LARGE],
    ['a reset of a small request', 'reset', 100],
  ] as const)('%s still opens the breaker', async (_name, answer, chars) => {
    const c = await coordinator(await engine(answer));
    for (let i = 0; i < 2; i++) expect((await chat(c.url, chars)).status).toBeGreaterThanOrEqual(500);
    expect(c.scheduling.scheduler.breakers.state('e0')).toBe('open');
    if (answer === 'reset') expect(c.controlPlane!.health.isHealthy('e0')).toBe(false);
  });

  it("Motor's own 413 names its limit, server.maxBodyBytes", async () => {
    const c = await coordinator(await engine('500'), 100_000);
    const r = await chat(c.url, 200_000);
    expect(r.status).toBe(413);
    expect(r.message).toBe(
      "request body exceeds 100000 bytes (the coordinator's limit, server.maxBodyBytes)",
    );
  });
});

describe('client errors carry no instance text by default', () => {
  const GENERIC: Record<string, RegExp> = {
    engine_error: /^an engine failed while serving the request$/,
    upload_refused: /^an engine refused the leg body as too large.*server\.maxBodyBytes/,
  };
  it.each([
    ['an engine 500', '500', 100, 502, 'engine_error'],
    ['an engine 413 on a large upload', '413-close', LARGE, 413, 'upload_refused'],
  ] as const)(
    '%s: the code stays, the message names no instance, URL or engine text',
    async (_n, answer, chars, status, code) => {
      const engineUrl = await engine(answer);
      const c = await coordinator(engineUrl, undefined, 'direct', false);
      const r = await chat(c.url, chars);
      expect(r.status).toBe(status);
      expect(r.code).toBe(code);
      expect(r.message).toMatch(GENERIC[code]!);
      const { host, port } = new URL(engineUrl);
      for (const leak of ['e0', host, port, 'engine crashed', '4194304'])
        expect(r.message).not.toContain(leak);
    },
  );

  it('server.instanceErrorsToClients passes the full message through', async () => {
    const c = await coordinator(await engine('500'), undefined, 'direct', true);
    expect((await chat(c.url, 100)).message).toMatch(/single engine e0 answered 500: engine crashed/);
  });
});
