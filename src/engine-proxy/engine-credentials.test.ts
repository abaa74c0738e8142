import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { engineAuthRefusal, type EngineKeys } from '../../test/helpers/engine-auth-rules.js';
import {
  engineReply,
  FakeEngineClient,
  hangUntilAborted,
  withSglangServerInfo,
  type EngineScript,
} from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  SGLANG_PREFILL_OPTIONS,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { startEngineProxy } from './server.js';
import { envelope } from './testing/index.js';

const USAGE = { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };

/** A fake engine that enforces the engine's own auth rules before `script` answers. */
function guarded(engine: 'vllm' | 'sglang', keys: EngineKeys, script: EngineScript): EngineScript {
  return (req) => {
    const refusal = engineAuthRefusal(engine, keys, req.path, req.headers.authorization);
    return refusal ? engineReply(refusal.status, refusal.body) : script(req);
  };
}

const sglangBody = (root: string): Record<string, unknown> => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  _motor_dispatch: envelope('prefill', 'concurrent_engine_sync', {
    root,
    prefillUrl: PREFILL_PEER,
    decodeUrl: DECODE_PEER,
  }),
});

const stop = (root: string): Record<string, unknown> => ({
  root_request_id: root,
  engine_request_id: `${root}#a1`,
  pair_id: `pair-${root}`,
  attempt_seq: 1,
  reason: 'timeout',
});

let proxy: InProcessProxy | null = null;
afterEach(async () => {
  await proxy?.close();
  proxy = null;
});

async function sglangProxy(
  keys: EngineKeys,
  flags: { engineApiKey?: string | null; engineAdminApiKey?: string | null },
  script: EngineScript,
): Promise<InProcessProxy> {
  return startInProcessProxy(
    { engine: 'sglang', dispatchCapabilities: ['concurrent_engine_sync'], ...flags },
    guarded('sglang', keys, withSglangServerInfo(script)),
  );
}

describe('engine proxy credentials (--engine-api-key, --engine-admin-api-key)', () => {
  it('sends the api key on legs instead of the client Authorization', async () => {
    proxy = await sglangProxy({ apiKey: 'k1' }, { engineApiKey: 'k1' }, () =>
      engineReply(200, { usage: USAGE }),
    );
    const res = await proxy.call('POST', '/v1/chat/completions', sglangBody('c1'), {
      headers: { authorization: 'Bearer client-key' },
    });
    expect(res.status).toBe(200);
    expect(proxy.engine.to('/v1/chat/completions')[0]!.headers.authorization).toBe('Bearer k1');
  });

  it.each([
    {
      name: 'the admin key when set',
      flags: { engineApiKey: 'k1', engineAdminApiKey: 'adm' },
      keys: { apiKey: 'k1', adminApiKey: 'adm' },
      sent: 'Bearer adm',
    },
    { name: 'else the api key', flags: { engineApiKey: 'k1' }, keys: { apiKey: 'k1' }, sent: 'Bearer k1' },
  ])('SGLang /abort_request carries $name (ADMIN_OPTIONAL)', async ({ flags, keys, sent }) => {
    const aborts: number[] = [];
    proxy = await sglangProxy(keys, flags, (req) => {
      if (req.path !== '/abort_request') return hangUntilAborted(req);
      aborts.push(200);
      return engineReply(200, '');
    });
    const pending = proxy.call('POST', '/v1/chat/completions', sglangBody('c2'));
    await proxy.engine.received(1);
    await proxy.call('POST', '/v1/dispatch/stop', stop('c2'));
    expect((await pending).status).toBe(409);
    expect(proxy.engine.to('/abort_request').map((r) => r.headers.authorization)).toEqual([sent]);
    expect(aborts).toEqual([200]); // the guarded engine accepted it
  });

  it('an engine 401 on a leg is a 502 naming the engine API key (never the key), not the client 401', async () => {
    proxy = await startInProcessProxy(
      { engine: 'vllm', role: 'union', dispatchCapabilities: [], engineApiKey: 'wrong-secret' },
      guarded('vllm', { apiKey: 'right' }, () => engineReply(200, { usage: USAGE })),
    );
    const res = await proxy.call('POST', '/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      _motor_dispatch: envelope('single', 'single', { root: 'c3' }),
    });
    expect(res.status).toBe(502);
    expect(res.text).toMatch(/engine answered 401 .*engine API key \(--engine-api-key\)/);
    expect(res.text).not.toContain('wrong-secret');
    // a pass-through call says the same
    const models = await proxy.call('GET', '/v1/models');
    expect(models.status).toBe(502);
    expect(models.text).toMatch(/engine API key/);
  });

  it("without a key of its own, the engine's 401 to the client's Authorization passes through", async () => {
    proxy = await startInProcessProxy(
      { engine: 'vllm', role: 'union', dispatchCapabilities: [] },
      guarded('vllm', { apiKey: 'right' }, () => engineReply(200, { data: [] })),
    );
    const res = await proxy.call('GET', '/v1/models', undefined, {
      headers: { authorization: 'Bearer nope' },
    });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'Unauthorized' });
    const ok = await proxy.call('GET', '/v1/models', undefined, {
      headers: { authorization: 'Bearer right' },
    });
    expect(ok.status).toBe(200);
  });

  it('an SGLang prefill whose engine refuses the key does not start', async () => {
    const engine = new FakeEngineClient(
      guarded(
        'sglang',
        { apiKey: 'right' },
        withSglangServerInfo(() => engineReply(200, {})),
      ),
    );
    await expect(
      startEngineProxy(
        {
          ...SGLANG_PREFILL_OPTIONS,
        },
        createLogger('test', 'silent'),
        { engine },
      ),
    ).rejects.toThrow(
      'engine answered 401 to GET /server_info: the engine API key (--engine-api-key) is missing or wrong',
    );
  });
});

describe('engine keys are never shown', () => {
  it('not in the start-up logs, /v1/motor/info, /debug/state, /health nor a refusal', async () => {
    const lines: string[] = [];
    const log = pino(
      { level: 'debug' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString('utf8'));
          done();
        },
      }),
    );
    const engine = new FakeEngineClient(
      guarded(
        'sglang',
        { apiKey: 'sekrit-api', adminApiKey: 'sekrit-admin' },
        withSglangServerInfo(() => engineReply(401, {})),
      ),
    );
    const server = await startEngineProxy(
      {
        ...SGLANG_PREFILL_OPTIONS,
        engineApiKey: 'sekrit-api',
        engineAdminApiKey: 'sekrit-admin',
      },
      log,
      { engine },
    );
    try {
      const texts = await Promise.all(
        ['/v1/motor/info', '/debug/state', '/health', '/v1/models'].map(async (path) =>
          (await fetch(`${server.url}${path}`)).text(),
        ),
      );
      expect(texts[3]).toMatch(/engine API key/); // the script's 401 on a guarded route
      expect([...texts, ...lines].join('\n')).not.toMatch(/sekrit/);
      expect(lines.join('')).toMatch(/listening/);
    } finally {
      await server.close();
    }
  });
});
