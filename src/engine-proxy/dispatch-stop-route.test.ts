import { afterEach, describe, expect, it } from 'vitest';
import { engineReply, hangUntilAborted } from './testing/fake-clients.js';
import { startInProcessProxy, type InProcessProxy } from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const stopOf = (root: string, patch: Record<string, unknown> = {}) => ({
  root_request_id: root,
  engine_request_id: `${root}#a1`,
  pair_id: `pair-${root}`,
  attempt_seq: 1,
  reason: 'client_disconnect',
  ...patch,
});
const single = (root: string) => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  _motor_dispatch: envelope('single', 'prefill_handoff_decode', { root }),
});
const union = { role: 'union' as const, dispatchCapabilities: [] };

describe('POST /v1/dispatch/stop', () => {
  const refusals: Array<{ name: string; body: unknown; text: RegExp | string }> = [
    {
      name: 'invalid JSON',
      body: '{',
      text: /^\{"error":\{"message":"invalid JSON body: [^"]+","type":"invalid_request_error","param":null,"code":null\}\}$/,
    },
    {
      name: 'invalid stop request',
      body: { root_request_id: 1 },
      text: '{"error":{"message":"root_request_id: Invalid input: expected string, received number","type":"invalid_request_error","param":"root_request_id","code":null}}',
    },
  ];

  it.each(refusals)('$name → 400', async ({ body, text }) => {
    proxy = await startInProcessProxy(union, hangUntilAborted);
    const res = await proxy.call('POST', '/v1/dispatch/stop', body);
    expect(res.status).toBe(400);
    if (typeof text === 'string') expect(res.text).toBe(text);
    else expect(res.text).toMatch(text);
  });

  it('an unknown attempt leaves a tombstone that refuses it when it arrives', async () => {
    proxy = await startInProcessProxy(union, hangUntilAborted);
    const res = await proxy.call('POST', '/v1/dispatch/stop', stopOf('t1'));
    expect(res.status).toBe(200);
    expect(res.text).toBe(
      '{"root_request_id":"t1","attempt_seq":1,"accepted":false,"state":"not_found","message":"no such attempt here; a tombstone refuses it if it arrives later"}',
    );
    const late = await proxy.call('POST', '/v1/chat/completions', single('t1'));
    expect(late.status).toBe(409);
    expect(late.text).toBe(
      '{"error":{"message":"attempt 1 of request t1 was stopped (client_disconnect) before it arrived; refusing it","type":"invalid_request_error","param":null,"code":"dispatch_stopped"}}',
    );
    expect(proxy.engine.requests).toEqual([]);
    expect(await proxy.metric('motor_proxy_stops_total{reason="client_disconnect",state="not_found"}')).toBe(
      1,
    );
  });

  it('stops an attempt in flight; later stops answer already_stopped or stale', async () => {
    proxy = await startInProcessProxy(union, hangUntilAborted);
    const pending = proxy.call('POST', '/v1/chat/completions', single('t2'));
    await proxy.engine.received(1);
    const dup = await proxy.call('POST', '/v1/chat/completions', single('t2'));
    expect(dup.text).toBe(
      '{"error":{"message":"attempt 1 of request t2 is already in flight here","type":"invalid_request_error","param":null,"code":"attempt_in_flight"}}',
    );
    const answers = [];
    for (const patch of [{ reason: 'timeout' }, { reason: 'timeout' }, { pair_id: 'other' }]) {
      answers.push((await proxy.call('POST', '/v1/dispatch/stop', stopOf('t2', patch))).json);
    }
    expect(answers).toEqual([
      {
        root_request_id: 't2',
        attempt_seq: 1,
        accepted: true,
        state: 'stopped',
        message: 'the engine request was aborted',
      },
      {
        root_request_id: 't2',
        attempt_seq: 1,
        accepted: true,
        state: 'already_stopped',
        message: 'already stopped (timeout)',
      },
      {
        root_request_id: 't2',
        attempt_seq: 1,
        accepted: false,
        state: 'stale',
        message: 'the attempt here belongs to another pair or engine request',
      },
    ]);
    expect((await pending).status).toBe(409);
  });

  // Issue 15 finding 3: a stop with a guessed pair learnt the real pair id from the stale answer.
  it('a stale answer names neither the pair nor the engine request holding the attempt', async () => {
    proxy = await startInProcessProxy(union, hangUntilAborted);
    const pending = proxy.call('POST', '/v1/chat/completions', single('t5'));
    await proxy.engine.received(1);
    const guess = { pair_id: 'guess', engine_request_id: 't5#a9' };
    const res = await proxy.call('POST', '/v1/dispatch/stop', stopOf('t5', guess));
    expect(res.json).toMatchObject({ accepted: false, state: 'stale' });
    expect(res.text).not.toContain('pair-t5');
    expect(res.text).not.toContain('t5#a1');
    await proxy.call('POST', '/v1/dispatch/stop', stopOf('t5'));
    expect((await pending).status).toBe(409);
  });

  it('a finished attempt answers already_done', async () => {
    proxy = await startInProcessProxy(union, () => engineReply(200, { id: 'x' }));
    await proxy.call('POST', '/v1/chat/completions', single('t3'));
    const res = await proxy.call('POST', '/v1/dispatch/stop', stopOf('t3'));
    expect(res.json).toEqual({
      root_request_id: 't3',
      attempt_seq: 1,
      accepted: true,
      state: 'already_done',
      message: 'the attempt had already finished',
    });
  });

  it("waits for the engine's abort call, but no longer than the peer timeout", async () => {
    proxy = await startInProcessProxy({ ...union, engine: 'sglang', peerTimeoutMs: 50 }, hangUntilAborted);
    const pending = proxy.call('POST', '/v1/chat/completions', single('t4'));
    await proxy.engine.received(1);
    const res = await proxy.call('POST', '/v1/dispatch/stop', stopOf('t4'));
    expect(res.json).toMatchObject({ state: 'stopped' });
    expect(proxy.engine.to('/abort_request')).toHaveLength(1);
    expect((await pending).status).toBe(409);
  });
});
