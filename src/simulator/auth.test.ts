import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { createLogger } from '../common/logger.js';
import { authorize, type AuthKeys } from './auth.js';
import type { SimEngine } from './options.js';
import { startSimulator, type RunningSimulator } from './server.js';
import { chatBody, http } from './testing/index.js';

const fakeReq = (headers: Record<string, string> = {}, method = 'POST'): IncomingMessage =>
  ({ method, headers }) as unknown as IncomingMessage;

const API = { apiKey: 'k', adminApiKey: null };
const ADMIN = { apiKey: null, adminApiKey: 'a' };
const BOTH = { apiKey: 'k', adminApiKey: 'a' };
const NONE = { apiKey: null, adminApiKey: null };
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('authorize: the engines’ --api-key / --admin-api-key rules', () => {
  it.each<[string, SimEngine, AuthKeys, string, Record<string, string>, number | null]>([
    // vLLM AuthenticationMiddleware: /v1* only
    ['vllm: /v1 without a key', 'vllm', API, '/v1/chat/completions', {}, 401],
    ['vllm: /v1 with the key', 'vllm', API, '/v1/chat/completions', bearer('k'), null],
    ['vllm: /v1 with a wrong key', 'vllm', API, '/v1/models', bearer('x'), 401],
    ['vllm: /metrics open', 'vllm', API, '/metrics', {}, null],
    ['vllm: /health open', 'vllm', API, '/health', {}, null],
    ['vllm: x-api-key is not vLLM’s', 'vllm', API, '/v1/models', { 'x-api-key': 'k' }, 401],
    ['vllm: no key configured', 'vllm', NONE, '/v1/models', {}, null],
    // SGLang decide_request_auth: everything but health/ready/metrics
    ['sglang: /generate without a key', 'sglang', API, '/generate', {}, 401],
    ['sglang: /server_info without a key', 'sglang', API, '/server_info', {}, 401],
    ['sglang: /v1 with the key', 'sglang', API, '/v1/chat/completions', bearer('k'), null],
    ['sglang: lower-case bearer scheme', 'sglang', API, '/generate', { authorization: 'bearer k' }, null],
    ['sglang: x-api-key', 'sglang', API, '/generate', { 'x-api-key': 'k' }, null],
    ['sglang: /health_generate open', 'sglang', API, '/health_generate', {}, null],
    ['sglang: /metrics open', 'sglang', API, '/metrics', {}, null],
    ['sglang: /ready open', 'sglang', BOTH, '/ready', {}, null],
    ['sglang: admin key does not unlock NORMAL routes', 'sglang', BOTH, '/generate', bearer('a'), 401],
    ['sglang: admin-only leaves NORMAL routes open', 'sglang', ADMIN, '/generate', {}, null],
    // ADMIN_OPTIONAL /abort_request
    ['abort: no keys → open', 'sglang', NONE, '/abort_request', {}, null],
    ['abort: api key only → api key', 'sglang', API, '/abort_request', bearer('k'), null],
    ['abort: api key only, none sent', 'sglang', API, '/abort_request', {}, 401],
    ['abort: both → admin key', 'sglang', BOTH, '/abort_request', bearer('a'), null],
    ['abort: both → api key refused', 'sglang', BOTH, '/abort_request', bearer('k'), 401],
    ['abort: admin only, none sent', 'sglang', ADMIN, '/abort_request', {}, 401],
    // the simulator's own hooks are no engine route
    ['sim: /debug open', 'sglang', BOTH, '/debug/requests', {}, null],
    ['sim: /internal open', 'vllm', API, '/internal/kv/pull', {}, null],
  ])('%s', (_name, engine, keys, path, headers, status) => {
    expect(authorize(engine, keys, fakeReq(headers), path)?.status ?? null).toBe(status);
  });

  it('OPTIONS is never checked', () => {
    expect(authorize('sglang', BOTH, fakeReq({}, 'OPTIONS'), '/generate')).toBeNull();
    expect(authorize('vllm', API, fakeReq({}, 'OPTIONS'), '/v1/models')).toBeNull();
  });
});

describe('auth on the wire (bodies per fixture)', () => {
  const log = createLogger('test', 'silent');
  let vllm: RunningSimulator;
  let sglang: RunningSimulator;
  beforeAll(async () => {
    [vllm, sglang] = await Promise.all([
      startSimulator({ port: 0, timeScale: 0, apiKey: 'k' }, log),
      startSimulator({ port: 0, timeScale: 0, engine: 'sglang', apiKey: 'k', adminApiKey: 'a' }, log),
    ]);
  });
  afterAll(async () => {
    await Promise.all([vllm?.close(), sglang?.close()]);
  });

  it.each([
    ['vllm', 'POST', '/v1/chat/completions', 'vllm/openai/unauthorized.json'],
    ['sglang', 'GET', '/server_info', 'sglang/server/unauthorized.json'],
    ['sglang', 'POST', '/abort_request', 'sglang/server/unauthorized.json'],
  ])('%s %s %s without a key → the fixture', async (engine, method, path, fixture) => {
    const sim = engine === 'vllm' ? vllm : sglang;
    const r = await http(sim.url, method, path, method === 'POST' ? chatBody('hi') : undefined);
    const f = loadEngineFixture(fixture);
    expect(r.status).toBe(f.status);
    expect(r.json).toEqual(f.body);
  });

  it('the right key passes; open routes stay open', async () => {
    const ok = await http(vllm.url, 'POST', '/v1/chat/completions', chatBody('hi', { max_tokens: 2 }), {
      authorization: 'Bearer k',
    });
    expect(ok.status).toBe(200);
    expect((await http(vllm.url, 'GET', '/metrics')).status).toBe(200);
    expect((await http(sglang.url, 'GET', '/health')).status).toBe(200);
    const abort = await http(
      sglang.url,
      'POST',
      '/abort_request',
      { rid: 'x' },
      { authorization: 'Bearer a' },
    );
    expect(abort.status).toBe(200);
  });
});
