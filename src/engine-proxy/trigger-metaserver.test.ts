import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { engineReply, unreachable } from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope, until } from './testing/index.js';

/**
 * The engine proxy's `/v1/metaserver` against what vllm-ascend's layer-wise connector really sends
 * (fixtures `vllm-ascend/layerwise-*`): vLLM's external id, every body shape by release.
 */

let proxy: InProcessProxy;
afterEach(() => proxy.close());

/** The X-Request-Id behind every fixture's request_id. */
const FIXTURE_ID = '3f9a0c1e2b7d4e5f8a6b9c0d1e2f3a4b';

const prepare = (root: string, body: Record<string, unknown> = {}) =>
  proxy.call('POST', '/v1/chat/completions', {
    model: 'qwen',
    messages: [{ role: 'user', content: 'Hello' }],
    ...body,
    _motor_dispatch: envelope('prefill', 'concurrent_engine_sync', {
      root,
      prefillUrl: PREFILL_PEER,
      decodeUrl: DECODE_PEER,
    }),
  });

/** A fixture's metaserver body, its request id rebuilt around `root`'s engine request id. */
function call(path: string, root: string): Record<string, unknown> {
  const body = fixtureBody(`vllm-ascend/${path}`);
  return { ...body, request_id: String(body.request_id).replace(FIXTURE_ID, `${root}#a1`) };
}

const CALLS = [
  'layerwise-v0.13/metaserver-call.chat.json',
  'layerwise-v0.13/metaserver-call.completions.json',
  'layerwise-v0.14/metaserver-call.chat.json',
  'layerwise-v0.15/metaserver-call.chat.json',
  'layerwise-v0.17/metaserver-call.chat.json',
  'layerwise-v0.17/metaserver-call.completions.json',
  'layerwise-v0.17/metaserver-call.full-prefix-hit.json',
];

describe('metaserver call as the real connector sends it', () => {
  it.each(CALLS)('%s: runs the prefill with the body verbatim, answers {"status":"ok"}', async (path) => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, () => engineReply(200, { id: 'c' }));
    await prepare('f1', { stream: true, stream_options: { include_usage: true }, max_tokens: 64 });
    const body = call(path, 'f1');
    const res = await proxy.call('POST', '/v1/metaserver', body);
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"status":"ok"}');
    const sent = proxy.engine.requests[0]!;
    expect(sent.headers['x-request-id']).toBe('f1#a1');
    const engineBody = JSON.parse(String(sent.body)) as Record<string, unknown>;
    expect(engineBody).toMatchObject({ stream: false, max_tokens: 1, min_tokens: 1 });
    expect(engineBody).not.toHaveProperty('stream_options');
    const form = path.includes('v0.14')
      ? 'chat_suffixed'
      : path.includes('completions')
        ? 'completions'
        : 'chat';
    expect(await proxy.metric(`motor_proxy_metaserver_id_forms_total{form="${form}"}`)).toBe(1);
    expect(engineBody.kv_transfer_params).toEqual({
      ...body,
      do_remote_decode: true,
      do_remote_prefill: false,
    });
  });

  it('a prefixed, suffixed id that arrives before its prepare waits for it', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 5_000 }, () => engineReply(200, { id: 'c' }));
    const early = proxy.call(
      'POST',
      '/v1/metaserver',
      call('layerwise-v0.14/metaserver-call.chat.json', 'f2'),
    );
    await until(
      async () => {
        const state = (await proxy.call('GET', '/debug/state')).json as { metaserver_waiting: number };
        return state.metaserver_waiting === 1;
      },
      'the metaserver call to wait',
      2_000,
    );
    expect((await prepare('f2')).status).toBe(200);
    expect((await early).text).toBe('{"status":"ok"}');
    expect(proxy.engine.requests).toHaveLength(1);
  });

  it.each([
    ['unknown after the bounded wait', 404, (b: Record<string, unknown>) => b],
    ['invalid', 400, ({ remote_port: _dropped, ...b }: Record<string, unknown>) => b],
  ])(
    'a call %s before its prepare: the late prepare is refused and the decode peer stopped',
    async (_name, status, shape) => {
      proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, unreachable);
      const res = await proxy.call(
        'POST',
        '/v1/metaserver',
        shape(call('layerwise-v0.17/metaserver-call.chat.json', 'f5')),
      );
      expect(res.status).toBe(status);
      const late = await prepare('f5');
      expect(late.status).toBe(409);
      expect(late.json).toMatchObject({ error: { code: 'dispatch_stopped' } });
      expect(proxy.peers.calls).toMatchObject([
        {
          origin: DECODE_PEER,
          path: '/v1/dispatch/stop',
          body: { engine_request_id: 'f5#a1', reason: 'peer_failed' },
        },
      ]);
      expect(proxy.engine.requests).toEqual([]);
    },
  );

  it("an invalid body under vLLM's id stops the prepared prefill and its decode peer", async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, unreachable);
    await prepare('f3');
    const { remote_host: _dropped, ...body } = call('layerwise-v0.17/metaserver-call.chat.json', 'f3');
    const res = await proxy.call('POST', '/v1/metaserver', body);
    expect(res.status).toBe(400);
    expect(proxy.peers.calls).toMatchObject([
      {
        origin: DECODE_PEER,
        path: '/v1/dispatch/stop',
        body: { engine_request_id: 'f3#a1', reason: 'peer_failed' },
      },
    ]);
    expect(proxy.engine.requests).toEqual([]);
  });

  it('a failed prefill answers 502 and stops the decode peer', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, () => engineReply(500, '{"error":"x"}'));
    await prepare('f4');
    const res = await proxy.call(
      'POST',
      '/v1/metaserver',
      call('layerwise-v0.17/metaserver-call.chat.json', 'f4'),
    );
    expect(res.status).toBe(502);
    expect(res.headers['x-request-id']).toBe('f4#a1');
    expect(proxy.peers.calls).toMatchObject([{ origin: DECODE_PEER, body: { reason: 'peer_failed' } }]);
  });
});
