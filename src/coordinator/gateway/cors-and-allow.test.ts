import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startCoordinator } from '../coordinator.js';

/** `server.cors` (off by default, preflight answered before auth) and `Allow` on every gateway 405. */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function coordinator(server: Record<string, unknown> = {}): Promise<string> {
  const config = validateCoordinatorConfig({ server: { port: 0, ...server }, instances: [] }, {});
  const running = await startCoordinator(config, createLogger('cors-test', 'silent'));
  closers.push(() => running.close());
  return running.url;
}

const PREFLIGHT = {
  method: 'OPTIONS',
  headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
};

describe('405 answers carry Allow', () => {
  it.each([
    ['GET', '/v1/chat/completions', 'POST'],
    ['DELETE', '/v1/completions', 'POST'],
    ['POST', '/v1/models', 'GET'],
    ['PUT', '/health', 'GET'],
  ])('%s %s → 405, Allow: %s, OpenAI error shape', async (method, path, allow) => {
    const url = await coordinator();
    const res = await fetch(`${url}${path}`, { method });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe(allow);
    expect(await res.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
  });
});

describe('server.cors', () => {
  it('is off by default: a preflight is a 405 without CORS headers', async () => {
    const url = await coordinator();
    const res = await fetch(`${url}/v1/chat/completions`, PREFLIGHT);
    expect(res.status).toBe(405);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers an allowed origin’s preflight 204 before authentication', async () => {
    const url = await coordinator({
      apiKeys: ['k'],
      cors: { allowedOrigins: ['https://app.example'], maxAgeSeconds: 60 },
    });
    const res = await fetch(`${url}/v1/chat/completions`, PREFLIGHT);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type');
    expect(res.headers.get('access-control-max-age')).toBe('60');
    expect(res.headers.get('vary')).toBe('Origin');
  });

  it.each([
    ['allowed origin', ['https://app.example'], 'https://app.example', 'https://app.example'],
    ['any origin', ['*'], 'https://other.example', '*'],
    ['other origin', ['https://app.example'], 'https://evil.example', null],
  ])('%s: a simple GET gets Access-Control-Allow-Origin %s', async (_name, origins, origin, expected) => {
    const url = await coordinator({ cors: { allowedOrigins: origins } });
    const res = await fetch(`${url}/v1/models`, { headers: { origin } });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(expected);
  });

  it('a disallowed origin’s preflight falls through to the 405', async () => {
    const url = await coordinator({ cors: { allowedOrigins: ['https://app.example'] } });
    const res = await fetch(`${url}/v1/chat/completions`, {
      ...PREFLIGHT,
      headers: { ...PREFLIGHT.headers, origin: 'https://evil.example' },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });
});
