import { afterEach, describe, expect, it } from 'vitest';
import { bootstrapRoomFor } from '../protocol/index.js';
import {
  engineReply,
  hangUntilAborted,
  unreachable,
  withSglangServerInfo,
  type EngineScript,
} from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

const HANDOFF = 'prefill_handoff_decode';
const KV = { remote_engine_id: 'engine-p', remote_block_ids: [1, 2] };
const USAGE = { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const chat = (root: string, peers: { decodeUrl?: string } = {}) => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  _motor_dispatch: envelope('prefill', HANDOFF, {
    root,
    prefillUrl: PREFILL_PEER,
    decodeUrl: peers.decodeUrl ?? DECODE_PEER,
  }),
});

describe('handoff prefill leg (vLLM)', () => {
  it('runs the prefill with the handoff KV params and answers a completed PrefillResult', async () => {
    proxy = await startInProcessProxy({}, () => engineReply(200, { kv_transfer_params: KV, usage: USAGE }));
    const before = Date.now();
    const res = await proxy.call('POST', '/v1/chat/completions', chat('r1'), { headers: { 'x-trace': 't' } });
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('r1#a1');
    expect(res.json).toMatchObject({
      object: 'motor.prefill_result',
      root_request_id: 'r1',
      engine_request_id: 'r1#a1',
      pair_id: 'pair-r1',
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      payload: KV,
      usage: USAGE,
    });
    const expires = (res.json as { expires_at_ms: number }).expires_at_ms;
    expect(expires).toBeGreaterThanOrEqual(before + 480_000);
    const [sent] = proxy.engine.requests;
    expect(sent).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    expect(sent!.headers).toMatchObject({
      'x-trace': 't',
      'x-request-id': 'r1#a1',
      'content-type': 'application/json',
    });
    expect(JSON.parse(String(sent!.body))).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      request_id: 'r1#a1',
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
      min_tokens: 1,
    });
    expect(proxy.peers.calls).toEqual([]);
    expect(
      await proxy.metric(
        'motor_proxy_dispatches_total{role="prefill",leg="handoff_prefill",outcome="completed"}',
      ),
    ).toBe(1);
  });

  // The failure ladder: every failure answers once, counts once, and stops the decode leg.
  const failures: Array<{
    name: string;
    engine: EngineScript;
    status: number;
    body: string | RegExp;
    contentType: string;
    outcome: string;
  }> = [
    {
      name: 'engine answers 500: relayed as JSON',
      engine: () => engineReply(500, 'boom', { headers: { 'content-type': 'text/plain' } }),
      status: 500,
      body: 'boom',
      contentType: 'application/json',
      outcome: 'engine_error',
    },
    {
      name: 'engine answers 400: relayed',
      engine: () => engineReply(400, { error: { message: 'bad', type: 'BadRequestError' } }),
      status: 400,
      body: '{"error":{"message":"bad","type":"BadRequestError"}}',
      contentType: 'application/json',
      outcome: 'engine_error',
    },
    {
      name: 'engine answers something not JSON',
      engine: () => engineReply(200, 'hello', { headers: { 'content-type': 'text/plain' } }),
      status: 502,
      body: /answered without kv_transfer_params/,
      contentType: 'application/json',
      outcome: 'engine_error',
    },
    {
      name: 'engine unreachable',
      engine: unreachable,
      status: 502,
      body: '{"error":{"message":"engine unreachable: connect ECONNREFUSED 10.0.0.5:30000","type":"server_error","param":null,"code":null}}',
      contentType: 'application/json',
      outcome: 'upstream_error',
    },
    {
      name: 'engine answer breaks off',
      engine: () => engineReply(200, ['{"kv_transfer_params":'], { end: 'fail' }),
      status: 502,
      body: /"engine unreachable: other side closed"/,
      contentType: 'application/json',
      outcome: 'upstream_error',
    },
  ];

  it.each(failures)('$name → $status, $outcome, peer stopped', async (row) => {
    proxy = await startInProcessProxy({}, row.engine);
    const res = await proxy.call('POST', '/v1/chat/completions', chat('r2'));
    expect(res.status).toBe(row.status);
    if (typeof row.body === 'string') expect(res.text).toBe(row.body);
    else expect(res.text).toMatch(row.body);
    expect(res.headers['content-type']).toBe(row.contentType);
    expect(res.headers['x-request-id']).toBeUndefined();
    expect(
      await proxy.metric(
        `motor_proxy_dispatches_total{role="prefill",leg="handoff_prefill",outcome="${row.outcome}"}`,
      ),
    ).toBe(1);
    expect(proxy.peers.calls).toHaveLength(1);
    expect(proxy.peers.calls[0]).toMatchObject({
      origin: DECODE_PEER,
      method: 'POST',
      path: '/v1/dispatch/stop',
      body: {
        root_request_id: 'r2',
        engine_request_id: 'r2#a1',
        pair_id: 'pair-r2',
        attempt_seq: 1,
        reason: 'peer_failed',
      },
    });
    // The attempt is over: the same attempt again is refused.
    const again = await proxy.call('POST', '/v1/chat/completions', chat('r2'));
    expect(again.json).toMatchObject({ error: { code: 'attempt_finished' } });
  });

  it('does not stop a peer that is not allowed (counted as refused)', async () => {
    proxy = await startInProcessProxy({}, unreachable);
    const res = await proxy.call(
      'POST',
      '/v1/chat/completions',
      chat('r3', { decodeUrl: 'http://10.9.9.9:1' }),
    );
    expect(res.status).toBe(502);
    expect(proxy.peers.calls).toEqual([]);
    expect(await proxy.metric('motor_proxy_peer_stops_total{outcome="refused"}')).toBe(1);
    expect(await proxy.metric('motor_proxy_peer_refused_total{use="stop"}')).toBe(1);
  });

  it('answers 409 dispatch_stopped when stopped while the engine runs it', async () => {
    proxy = await startInProcessProxy({}, hangUntilAborted);
    const pending = proxy.call('POST', '/v1/chat/completions', chat('r4'));
    await proxy.engine.received(1);
    const stop = await proxy.call('POST', '/v1/dispatch/stop', {
      root_request_id: 'r4',
      engine_request_id: 'r4#a1',
      pair_id: 'pair-r4',
      attempt_seq: 1,
      reason: 'client_disconnect',
    });
    expect(stop.json).toMatchObject({ accepted: true, state: 'stopped' });
    const res = await pending;
    expect(res.status).toBe(409);
    expect(res.text).toBe(
      '{"error":{"message":"attempt 1 of request r4 was stopped (client_disconnect)","type":"invalid_request_error","param":null,"code":"dispatch_stopped"}}',
    );
    expect(
      await proxy.metric(
        'motor_proxy_dispatches_total{role="prefill",leg="handoff_prefill",outcome="stopped"}',
      ),
    ).toBe(1);
    expect(proxy.peers.calls).toEqual([]);
  });
});

describe('bootstrap prefill leg (SGLang)', () => {
  const sglang = {
    engine: 'sglang' as const,
    dispatchCapabilities: ['concurrent_engine_sync'],
  };
  const body = (root: string) => ({
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    _motor_dispatch: envelope('prefill', 'concurrent_engine_sync', {
      root,
      prefillUrl: PREFILL_PEER,
      decodeUrl: DECODE_PEER,
    }),
  });

  it('sends its own bootstrap address and room, answers a bootstrap PrefillResult without expiry', async () => {
    proxy = await startInProcessProxy(
      sglang,
      withSglangServerInfo(() => engineReply(200, { usage: USAGE })),
    );
    const res = await proxy.call('POST', '/v1/chat/completions', body('b1'));
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      status: 'completed',
      handoff_mode: 'bootstrap',
      payload: {},
      usage: USAGE,
      expires_at_ms: null,
    });
    const sent = JSON.parse(String(proxy.engine.requests[0]!.body)) as Record<string, unknown>;
    expect(sent).toMatchObject({ rid: 'b1#a1', bootstrap_host: '10.0.0.5', bootstrap_port: 8998 });
    expect(String(proxy.engine.requests[0]!.body)).toContain(
      `"bootstrap_room":${bootstrapRoomFor('pair-b1', 1).toString()}`,
    );
  });

  it('a stop also calls the engine abort endpoint', async () => {
    proxy = await startInProcessProxy(
      sglang,
      withSglangServerInfo((req) =>
        req.path === '/abort_request' ? engineReply(200, {}) : hangUntilAborted(req),
      ),
    );
    const pending = proxy.call('POST', '/v1/chat/completions', body('b2'));
    await proxy.engine.received(1);
    await proxy.call('POST', '/v1/dispatch/stop', {
      root_request_id: 'b2',
      engine_request_id: 'b2#a1',
      pair_id: 'pair-b2',
      attempt_seq: 1,
      reason: 'timeout',
    });
    expect((await pending).status).toBe(409);
    expect(proxy.engine.to('/abort_request').map((r) => JSON.parse(String(r.body)))).toEqual([
      { rid: 'b2#a1' },
    ]);
  });
});
