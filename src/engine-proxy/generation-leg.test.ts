import { afterEach, describe, expect, it } from 'vitest';
import { bootstrapRoomFor, buildPrefillResult } from '../protocol/index.js';
import {
  engineReply,
  hangUntilAborted,
  sseReply,
  unreachable,
  type EngineScript,
} from './testing/fake-clients.js';
import type { PeerReply } from './http-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const HANDOFF = 'prefill_handoff_decode';
const CONCURRENT = 'concurrent_engine_sync';
const MESSAGES = [{ role: 'user', content: 'hi' }];
const ANSWER = {
  id: 'cmpl',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, token_ids: [7] }],
  kv_transfer_params: { remote_engine_id: 'e' },
  prompt_token_ids: [1, 2],
};
const chunk = (content: string, extra: Record<string, unknown> = {}) => ({
  id: 'c',
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta: { content } }],
  ...extra,
});
const single = (root: string, extra: Record<string, unknown> = {}) => ({
  model: 'm',
  messages: MESSAGES,
  _motor_dispatch: envelope('single', HANDOFF, { root }),
  ...extra,
});
const stopBody = (root: string, reason = 'client_disconnect') => ({
  root_request_id: root,
  engine_request_id: `${root}#a1`,
  pair_id: `pair-${root}`,
  attempt_seq: 1,
  reason,
});
const singleMetric = (outcome: string) =>
  proxy.metric(`motor_proxy_dispatches_total{role="single",leg="single",outcome="${outcome}"}`);

describe('single leg', () => {
  const answers: Array<{
    name: string;
    body: Record<string, unknown>;
    engine: EngineScript;
    text: string;
  }> = [
    {
      name: 'whole answer: internal fields and unasked token ids removed',
      body: {},
      engine: () =>
        engineReply(200, ANSWER, { headers: { 'content-type': 'application/json', 'x-engine': 'e' } }),
      text: '{"id":"cmpl","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}',
    },
    {
      name: 'whole answer: token ids kept when asked for',
      body: { return_token_ids: true },
      engine: () =>
        engineReply(200, ANSWER, { headers: { 'content-type': 'application/json', 'x-engine': 'e' } }),
      text: '{"id":"cmpl","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"token_ids":[7]}],"prompt_token_ids":[1,2]}',
    },
    {
      name: 'streamed answer: each event normalised',
      body: { stream: true },
      engine: () => sseReply([chunk('a', { kv_transfer_params: { x: 1 } }), chunk('b')]),
      text:
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n' +
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"b"}}]}\n\n' +
        'data: [DONE]\n\n',
    },
  ];

  it.each(answers)('$name', async (row) => {
    proxy = await startInProcessProxy({ role: 'union', dispatchCapabilities: [] }, row.engine);
    const res = await proxy.call('POST', '/v1/chat/completions', single('s1', row.body));
    expect(res.status).toBe(200);
    expect(res.text).toBe(row.text);
    expect(res.headers['x-request-id']).toBe('s1#a1');
    const sent = JSON.parse(String(proxy.engine.requests[0]!.body)) as Record<string, unknown>;
    expect(sent).toEqual({ model: 'm', messages: MESSAGES, request_id: 's1#a1', ...row.body });
    expect(await singleMetric('completed')).toBe(1);
  });

  const failures: Array<{
    name: string;
    engine: EngineScript;
    status: number | 'destroyed';
    text?: string;
    contentType?: string;
    outcome: string;
  }> = [
    {
      name: 'engine answers 400: relayed with its content-type',
      engine: () => engineReply(400, 'no', { headers: { 'content-type': 'text/plain' } }),
      status: 400,
      text: 'no',
      contentType: 'text/plain',
      outcome: 'engine_error',
    },
    {
      name: 'engine answers 503 without a content-type: relayed as JSON',
      engine: () => engineReply(503, 'busy', { headers: {} }),
      status: 503,
      text: 'busy',
      contentType: 'application/json',
      outcome: 'engine_error',
    },
    {
      name: 'engine unreachable',
      engine: unreachable,
      status: 502,
      text: '{"error":{"message":"engine unreachable: connect ECONNREFUSED 10.0.0.5:30000","type":"server_error","param":null,"code":null}}',
      contentType: 'application/json',
      outcome: 'upstream_error',
    },
    {
      name: 'stream breaks off: never ends a 200 cleanly',
      engine: () => sseReply([chunk('a')], { end: 'fail' }),
      status: 'destroyed',
      outcome: 'upstream_error',
    },
    {
      name: 'whole answer breaks off',
      engine: () => engineReply(200, ['{"id":'], { end: 'fail' }),
      status: 'destroyed',
      outcome: 'upstream_error',
    },
  ];

  it.each(failures)('$name → $status, $outcome', async (row) => {
    proxy = await startInProcessProxy({ role: 'union', dispatchCapabilities: [] }, row.engine);
    const res = await proxy.call('POST', '/v1/chat/completions', single('s2')).catch((err: Error) => err);
    if (row.status === 'destroyed') {
      expect(res).toBeInstanceOf(Error);
    } else {
      expect(res).toMatchObject({ status: row.status, text: row.text });
      expect((res as { headers: Record<string, unknown> }).headers['content-type']).toBe(row.contentType);
    }
    expect(await singleMetric(row.outcome)).toBe(1);
    expect(proxy.peers.calls).toEqual([]); // a single leg has no peer
  });

  it('a stop while streaming ends the answer (counted as stopped)', async () => {
    proxy = await startInProcessProxy({ role: 'union', dispatchCapabilities: [] }, (req) =>
      sseReply([chunk('a')], { end: 'hang', signal: req.signal }),
    );
    const pending = proxy
      .call('POST', '/v1/chat/completions', single('s3', { stream: true }))
      .catch((e: Error) => e);
    await proxy.engine.received(1);
    const stop = await proxy.call('POST', '/v1/dispatch/stop', stopBody('s3', 'timeout'));
    expect(stop.json).toMatchObject({ state: 'stopped' });
    expect(await pending).toBeInstanceOf(Error);
    expect(await singleMetric('stopped')).toBe(1);
  });

  it('a client disconnect aborts the engine request', async () => {
    proxy = await startInProcessProxy({ role: 'union', dispatchCapabilities: [] }, hangUntilAborted);
    const client = new AbortController();
    const pending = proxy
      .call('POST', '/v1/chat/completions', single('s4'), { signal: client.signal })
      .catch(() => null);
    await proxy.engine.received(1);
    const signal = proxy.engine.requests[0]!.signal!;
    const aborted = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    client.abort();
    await aborted;
    await pending;
    const stop = await proxy.call('POST', '/v1/dispatch/stop', stopBody('s4'));
    expect(stop.json).toMatchObject({
      state: 'already_stopped',
      message: 'already stopped (client_disconnect)',
    });
  });
});

describe('decode legs', () => {
  const decode = (mode: string, root: string, opts: { prefillUrl?: string | null } = {}) =>
    envelope('decode', mode, {
      root,
      prefillUrl: opts.prefillUrl === undefined ? PREFILL_PEER : opts.prefillUrl,
      decodeUrl: DECODE_PEER,
    });
  const decodeMetric = (leg: string, outcome: string) =>
    proxy.metric(`motor_proxy_dispatches_total{role="decode",leg="${leg}",outcome="${outcome}"}`);

  it('handoff decode: the prefill result payload becomes kv_transfer_params, verbatim', async () => {
    proxy = await startInProcessProxy({ role: 'decode' }, () => engineReply(200, ANSWER));
    const dispatch = decode(HANDOFF, 'd1');
    const prefillResult = buildPrefillResult({
      root_request_id: 'd1',
      engine_request_id: 'd1#a1',
      pair_id: 'pair-d1',
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      payload: { remote_engine_id: 'p', remote_block_ids: [1] },
      usage: null,
      expires_at_ms: null,
    });
    const res = await proxy.call('POST', '/v1/chat/completions', {
      model: 'm',
      messages: MESSAGES,
      _motor_dispatch: dispatch,
      _motor_prefill_result: prefillResult,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(String(proxy.engine.requests[0]!.body))).toEqual({
      model: 'm',
      messages: MESSAGES,
      request_id: 'd1#a1',
      kv_transfer_params: { remote_engine_id: 'p', remote_block_ids: [1] },
    });
    expect(await decodeMetric('handoff_decode', 'completed')).toBe(1);
  });

  it('an engine failure on a decode leg stops the prefill peer', async () => {
    proxy = await startInProcessProxy({ role: 'decode' }, unreachable);
    const res = await proxy.call('POST', '/v1/chat/completions', {
      model: 'm',
      messages: MESSAGES,
      _motor_dispatch: decode(CONCURRENT, 'd2'),
    });
    expect(res.status).toBe(502);
    expect(proxy.peers.calls).toMatchObject([
      {
        origin: PREFILL_PEER,
        method: 'POST',
        path: '/v1/dispatch/stop',
        body: { root_request_id: 'd2', reason: 'peer_failed' },
      },
    ]);
    expect(await decodeMetric('trigger_decode', 'upstream_error')).toBe(1);
  });

  it('trigger decode: names the prefill proxy as metaserver', async () => {
    proxy = await startInProcessProxy({ role: 'decode' }, () => engineReply(200, ANSWER));
    await proxy.call('POST', '/v1/chat/completions', {
      model: 'm',
      messages: MESSAGES,
      _motor_dispatch: decode(CONCURRENT, 'd3'),
    });
    expect(JSON.parse(String(proxy.engine.requests[0]!.body))).toMatchObject({
      kv_transfer_params: {
        do_remote_decode: false,
        do_remote_prefill: true,
        metaserver: `${PREFILL_PEER}/v1/metaserver`,
      },
    });
  });

  const refusals: Array<{
    name: string;
    opts: Record<string, unknown>;
    mode: string;
    prefillUrl: string | null;
    text: string;
    leg: string;
  }> = [
    {
      name: 'trigger decode naming a peer not allowed',
      opts: {},
      mode: CONCURRENT,
      prefillUrl: 'http://10.9.9.9:1',
      leg: 'trigger_decode',
      text: '{"error":{"message":"_motor_dispatch.endpoints.prefill.url: http://10.9.9.9:1 is not an allowed peer (--peer-allow)","type":"invalid_request_error","param":"_motor_dispatch.endpoints.prefill.url","code":null}}',
    },
    {
      name: 'trigger decode without a prefill url',
      opts: {},
      mode: CONCURRENT,
      prefillUrl: null,
      leg: 'trigger_decode',
      text: '{"error":{"message":"a trigger decode needs _motor_dispatch.endpoints.prefill.url (the metaserver host)","type":"invalid_request_error","param":"_motor_dispatch.endpoints.prefill","code":null}}',
    },
    {
      name: 'bootstrap decode without a prefill url',
      opts: { engine: 'sglang', dispatchCapabilities: [CONCURRENT] },
      mode: CONCURRENT,
      prefillUrl: null,
      leg: 'bootstrap_decode',
      text: '{"error":{"message":"_motor_dispatch.endpoints.prefill.url: required for a bootstrap decode","type":"invalid_request_error","param":"_motor_dispatch.endpoints.prefill.url","code":null}}',
    },
  ];

  it.each(refusals)('$name → 400, engine not called, no peer stop', async (row) => {
    proxy = await startInProcessProxy({ role: 'decode', ...row.opts }, unreachable);
    const res = await proxy.call('POST', '/v1/chat/completions', {
      model: 'm',
      messages: MESSAGES,
      _motor_dispatch: decode(row.mode, 'd4', { prefillUrl: row.prefillUrl }),
    });
    expect(res.status).toBe(400);
    expect(res.text).toBe(row.text);
    expect(proxy.engine.requests).toEqual([]);
    expect(proxy.peers.calls).toEqual([]);
    expect(await decodeMetric(row.leg, 'rejected')).toBe(1);
  });

  describe('bootstrap decode (SGLang)', () => {
    const sglang = { role: 'decode' as const, engine: 'sglang' as const, dispatchCapabilities: [CONCURRENT] };
    const info = (bootstrap: unknown): PeerReply => ({ status: 200, json: { bootstrap } });
    const body = (root: string) => ({
      model: 'm',
      messages: MESSAGES,
      _motor_dispatch: decode(CONCURRENT, root),
    });

    it('asks the prefill proxy for its bootstrap address and sends it with the room', async () => {
      proxy = await startInProcessProxy(
        sglang,
        () => engineReply(200, ANSWER),
        () => info({ host: '10.0.0.7', port: 8998 }),
      );
      expect((await proxy.call('POST', '/v1/chat/completions', body('b1'))).status).toBe(200);
      expect(proxy.peers.calls).toMatchObject([
        { origin: PREFILL_PEER, method: 'GET', path: '/v1/motor/info' },
      ]);
      const sent = String(proxy.engine.requests[0]!.body);
      expect(JSON.parse(sent)).toMatchObject({
        rid: 'b1#a1',
        bootstrap_host: '10.0.0.7',
        bootstrap_port: 8998,
      });
      expect(sent).toContain(`"bootstrap_room":${bootstrapRoomFor('pair-b1', 1).toString()}`);
    });

    it('a prefill peer without a bootstrap address: 502 and the peer is stopped', async () => {
      proxy = await startInProcessProxy(sglang, unreachable, (call) =>
        call.method === 'GET' ? info(null) : { status: 200, json: {} },
      );
      const res = await proxy.call('POST', '/v1/chat/completions', body('b2'));
      expect(res.status).toBe(502);
      expect(res.text).toBe(
        `{"error":{"message":"prefill peer ${PREFILL_PEER} did not report a bootstrap address (GET /v1/motor/info answered 200)","type":"server_error","param":null,"code":null}}`,
      );
      expect(proxy.peers.calls.map((c) => `${c.method} ${c.path}`)).toEqual([
        'GET /v1/motor/info',
        'POST /v1/dispatch/stop',
      ]);
      expect(await decodeMetric('bootstrap_decode', 'rejected')).toBe(1);
    });
  });
});
