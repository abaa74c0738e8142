import { afterEach, describe, expect, it } from 'vitest';
import { engineReply, hangUntilAborted, unreachable, type EngineScript } from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

const TRIGGER = 'concurrent_engine_sync';

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const prepare = (root: string) =>
  proxy.call('POST', '/v1/chat/completions', {
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    _motor_dispatch: envelope('prefill', TRIGGER, { root, prefillUrl: PREFILL_PEER, decodeUrl: DECODE_PEER }),
  });

/** The decode engine's KV fields for `root`'s attempt 1. */
const kvOf = (root: string) => ({
  request_id: `${root}#a1`,
  do_remote_decode: true,
  remote_block_ids: [4, 5],
  remote_block_size: 16,
  remote_engine_id: 'engine-d',
  remote_host: '10.0.0.6',
  remote_port: 7000,
  remote_cached_tokens: 0,
});
/** Its metaserver call: the KV fields plus a key its connector added. */
const kvFields = (root: string) => ({ ...kvOf(root), connector_extra: 'x' });
const metaserver = (body: unknown) => proxy.call('POST', '/v1/metaserver', body);
const triggerMetric = (outcome: string) =>
  proxy.metric(`motor_proxy_dispatches_total{role="prefill",leg="trigger_prefill",outcome="${outcome}"}`);

describe('trigger prepare', () => {
  it('caches the prefill and answers a prepared PrefillResult without calling the engine', async () => {
    proxy = await startInProcessProxy({}, unreachable);
    const before = Date.now();
    const res = await prepare('t1');
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('t1#a1');
    expect(res.json).toMatchObject({
      object: 'motor.prefill_result',
      engine_request_id: 't1#a1',
      status: 'prepared',
      handoff_mode: 'trigger',
    });
    expect((res.json as { expires_at_ms: number }).expires_at_ms).toBeGreaterThanOrEqual(before + 30_000);
    expect(proxy.engine.requests).toEqual([]);
    expect((await proxy.call('GET', '/debug/state')).json).toMatchObject({ prepared_prefills: 1 });
    expect(await triggerMetric('prepared')).toBe(1);
  });

  it('refuses with 503 when the prepared store is full', async () => {
    proxy = await startInProcessProxy({ maxPrepared: 1 }, unreachable);
    await prepare('t2');
    const res = await prepare('t3');
    expect(res.status).toBe(503);
    expect(res.text).toBe(
      '{"error":{"message":"too many prepared prefills waiting (1)","type":"server_error","param":null,"code":null}}',
    );
    expect(await triggerMetric('refused')).toBe(1);
  });
});

describe('metaserver call (trigger prefill)', () => {
  it('runs the prepared prefill with the decode KV fields verbatim and answers {"status":"ok"}', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, () =>
      engineReply(200, { id: 'c', usage: { prompt_tokens: 3 } }),
    );
    await prepare('m1');
    const res = await metaserver(kvFields('m1'));
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"status":"ok"}');
    expect(res.headers['x-request-id']).toBe('m1#a1');
    const sent = proxy.engine.requests[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    // The connector's body verbatim (its extra key included), only the prefill flags forced.
    expect(JSON.parse(String(sent.body))).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      request_id: 'm1#a1',
      stream: false,
      max_tokens: 1,
      min_tokens: 1,
      kv_transfer_params: { ...kvFields('m1'), do_remote_prefill: false },
    });
    expect(await triggerMetric('completed')).toBe(1);
    expect(await proxy.metric('motor_proxy_metaserver_calls_total{outcome="completed"}')).toBe(1);
    // Consumed: a second call finds nothing.
    expect((await metaserver(kvFields('m1'))).status).toBe(404);
  });

  const failures: Array<{
    name: string;
    engine: EngineScript;
    status: number;
    body: string;
    contentType: string;
    outcome: string;
  }> = [
    {
      name: 'engine answers 500: 502 with its body, content-type and the request id',
      engine: () => engineReply(500, 'boom', { headers: { 'content-type': 'text/plain' } }),
      status: 502,
      body: 'boom',
      contentType: 'text/plain',
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
  ];

  it.each(failures)('$name → $status, $outcome, decode leg stopped', async (row) => {
    proxy = await startInProcessProxy({}, row.engine);
    await prepare('m2');
    const res = await metaserver(kvFields('m2'));
    expect(res.status).toBe(row.status);
    expect(res.text).toBe(row.body);
    expect(res.headers['content-type']).toBe(row.contentType);
    expect(await triggerMetric(row.outcome)).toBe(1);
    expect(await proxy.metric(`motor_proxy_metaserver_calls_total{outcome="${row.outcome}"}`)).toBe(1);
    expect(proxy.peers.calls).toMatchObject([
      {
        origin: DECODE_PEER,
        path: '/v1/dispatch/stop',
        body: { root_request_id: 'm2', reason: 'peer_failed' },
      },
    ]);
  });

  const refusals: Array<{ name: string; body: unknown; status: number; text: string | RegExp }> = [
    {
      name: 'invalid JSON',
      body: '{',
      status: 400,
      // Node's JSON.parse message differs between versions; the rest is exact.
      text: /^\{"error":\{"message":"invalid JSON body: [^"]+","type":"invalid_request_error","param":null,"code":null\}\}$/,
    },
    {
      name: 'no request_id',
      body: { do_remote_decode: true },
      status: 400,
      text: '{"error":{"message":"request_id: required non-empty string","type":"invalid_request_error","param":"request_id","code":null}}',
    },
    {
      name: 'empty request_id',
      body: { request_id: '' },
      status: 400,
      text: '{"error":{"message":"request_id: required non-empty string","type":"invalid_request_error","param":"request_id","code":null}}',
    },
    {
      name: 'unknown request_id (after the bounded wait)',
      body: kvFields('nobody'),
      status: 404,
      text: '{"error":{"message":"no prepared prefill for request_id nobody#a1 within 20 ms (unknown, expired, stopped, or already consumed)","type":"not_found_error","param":"request_id","code":null}}',
    },
  ];

  it.each(refusals)('$name → $status', async (row) => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, unreachable);
    const res = await metaserver(row.body);
    expect(res.status).toBe(row.status);
    if (typeof row.text === 'string') expect(res.text).toBe(row.text);
    else expect(res.text).toMatch(row.text);
    expect(proxy.engine.requests).toEqual([]);
  });

  it('invalid KV fields stop the prepared prefill and its decode peer', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, unreachable);
    await prepare('m3');
    const res = await metaserver({ request_id: 'm3#a1', remote_block_ids: 'x' });
    expect(res.status).toBe(400);
    expect(res.text).toBe(
      '{"error":{"message":"invalid metaserver KV fields: remote_block_ids: required, array (flat or one list per KV group)","type":"invalid_request_error","param":"remote_block_ids","code":null}}',
    );
    expect(proxy.peers.calls).toMatchObject([{ origin: DECODE_PEER, body: { root_request_id: 'm3' } }]);
    expect((await metaserver(kvFields('m3'))).status).toBe(404);
    expect(await proxy.metric('motor_proxy_metaserver_calls_total{outcome="invalid"}')).toBe(1);
  });

  it('a metaserver call that arrives before its prepare waits for it', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 5_000 }, () => engineReply(200, { id: 'late' }));
    const early = metaserver(kvFields('m4'));
    while (
      ((await proxy.call('GET', '/debug/state')).json as { metaserver_waiting: number }).metaserver_waiting <
      1
    );
    expect((await prepare('m4')).status).toBe(200);
    const res = await early;
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"status":"ok"}');
  });

  it('a stop before the metaserver call drops the prepared prefill', async () => {
    proxy = await startInProcessProxy({ metaserverWaitMs: 20 }, unreachable);
    await prepare('m5');
    const stop = await proxy.call('POST', '/v1/dispatch/stop', {
      root_request_id: 'm5',
      engine_request_id: 'm5#a1',
      pair_id: 'pair-m5',
      attempt_seq: 1,
      reason: 'client_disconnect',
    });
    expect(stop.json).toMatchObject({ state: 'stopped' });
    expect((await metaserver(kvFields('m5'))).status).toBe(404);
  });

  it('the metaserver caller going away aborts the engine request', async () => {
    proxy = await startInProcessProxy({}, hangUntilAborted);
    await prepare('m6');
    const caller = new AbortController();
    const call = proxy
      .call('POST', '/v1/metaserver', kvFields('m6'), { signal: caller.signal })
      .catch(() => null);
    await proxy.engine.received(1);
    const signal = proxy.engine.requests[0]!.signal!;
    const aborted = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    caller.abort();
    await aborted;
    await call;
    expect(signal.aborted).toBe(true);
  });
});
