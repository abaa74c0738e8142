import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapRoomFor } from '../src/protocol/index.js';
import {
  engineConfigFile,
  envelope,
  recorded,
  recordingServer,
  until,
  type RecordingServer,
} from '../src/engine-proxy/testing/index.js';
import { chatBody, http, idleLedger, post, sseEvents } from '../src/simulator/testing/index.js';
import { startMotor, type MotorProcess } from './helpers/motor-process.js';

/** Process start-up is slow when the machine is loaded (two cores shared with other suites). */
const start = (args: string[]) => startMotor(args, { timeoutMs: 60_000 });

/** Conformance 17–21 and 30 at the engine side: two proxies in front of two `motor sim` processes per flow. */

const PROMPT = 'Disaggregated serving moves the KV cache from prefill to decode; this prompt spans blocks.';
const HANDOFF = 'prefill_handoff_decode';
const CONCURRENT = 'concurrent_engine_sync';
const nixl = engineConfigFile('nixl', { kv_transfer_config: { kv_connector: 'NixlConnector' } });
const layerwise = engineConfigFile('layerwise', {
  kv_transfer_config: { kv_connector: 'MooncakeLayerwiseConnector' },
});
const sglang = engineConfigFile('sglang', { engine_type: 'sglang' });
const ANY_LOCAL_PEER = ['--peer-allow', 'http://127.0.0.1:*'];

const sim = (...args: string[]) => start(['sim', '--time-scale', '0', ...args]);
const proxy = (engine: MotorProcess, role: string, config: string | null, ...args: string[]) =>
  start([
    'engine-proxy',
    '--engine-url',
    engine.url,
    '--role',
    role,
    ...(config ? ['--engine-config', config] : []),
    ...args,
  ]);

interface Flow {
  simP: MotorProcess;
  simD: MotorProcess;
  proxyP: MotorProcess;
  proxyD: MotorProcess;
}
let handoff: Flow, trigger: Flow, boot: Flow;
let peer: RecordingServer;
const procs: MotorProcess[] = [];

// Every process of every flow starts at once: two cores, so overlap the start-up cost.
beforeAll(async () => {
  const sims = await Promise.all([
    sim('--role', 'prefill', '--kv-connector', 'NixlConnector'),
    sim('--role', 'decode', '--kv-connector', 'NixlConnector'),
    sim('--role', 'prefill', '--kv-connector', 'MooncakeLayerwiseConnector'),
    sim('--role', 'decode', '--kv-connector', 'MooncakeLayerwiseConnector', '--kv-wait-ms', '5000'),
    sim('--engine', 'sglang', '--role', 'prefill'),
    sim('--engine', 'sglang', '--role', 'decode'),
  ]);
  procs.push(...sims);
  peer = await recordingServer();
  const [hp, hd, tp, td, bp, bd] = sims as [
    MotorProcess,
    MotorProcess,
    MotorProcess,
    MotorProcess,
    MotorProcess,
    MotorProcess,
  ];
  const proxies = await Promise.all([
    proxy(hp, 'prefill', nixl, ...ANY_LOCAL_PEER),
    proxy(hd, 'decode', nixl, ...ANY_LOCAL_PEER),
    proxy(
      tp,
      'prefill',
      layerwise,
      ...ANY_LOCAL_PEER,
      '--metaserver-wait-ms',
      '1500',
      '--prepared-ttl-ms',
      '2500',
    ),
    proxy(td, 'decode', layerwise, ...ANY_LOCAL_PEER),
    proxy(bp, 'prefill', sglang, ...ANY_LOCAL_PEER),
    proxy(bd, 'decode', sglang, ...ANY_LOCAL_PEER),
  ]);
  procs.push(...proxies);
  const [hpp, hpd, tpp, tpd, bpp, bpd] = proxies as typeof sims;
  handoff = { simP: hp, simD: hd, proxyP: hpp!, proxyD: hpd! };
  trigger = { simP: tp, simD: td, proxyP: tpp!, proxyD: tpd! };
  boot = { simP: bp, simD: bd, proxyP: bpp!, proxyD: bpd! };
}, 120_000);
afterAll(async () => {
  await Promise.all([...procs.map((p) => p.stop()), peer?.close()]);
});

describe('vLLM handoff through two proxies (conformance 17, 19)', () => {
  let simP: MotorProcess, simD: MotorProcess, proxyP: MotorProcess, proxyD: MotorProcess;
  beforeAll(() => void ({ simP, simD, proxyP, proxyD } = handoff));

  it.each([false, true])('prefill → PrefillResult → decode (stream=%s)', async (stream) => {
    const root = `handoff-${stream}`;
    const ids = { root, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const prefillBody = chatBody(PROMPT, {
      max_tokens: 1,
      stream: false,
      _motor_dispatch: envelope('prefill', HANDOFF, ids),
    });
    const p = await post(proxyP.url, '/v1/chat/completions', prefillBody);
    expect(p.status).toBe(200);
    expect(p.headers['x-request-id']).toBe(`${root}#a1`);
    expect(p.json).toMatchObject({
      object: 'motor.prefill_result',
      root_request_id: root,
      engine_request_id: `${root}#a1`,
      pair_id: `pair-${root}`,
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      // vLLM's internal id: the external `chatcmpl-<X-Request-Id>` plus its random 8-hex suffix
      payload: {
        do_remote_prefill: true,
        remote_request_id: expect.stringMatching(new RegExp(`^chatcmpl-${root}#a1-[0-9a-f]{8}$`)),
      },
      usage: { prompt_tokens: expect.any(Number) },
    });
    expect(p.json.expires_at_ms).toBeGreaterThan(Date.now());

    // Exactly what the prefill engine received (17): request_id, X-Request-Id, kv_transfer_params,
    // min_tokens 1 (so an EOS cannot end it: src/engine-adapters/vllm.ts), no envelope.
    const [pReq, ...pMore] = await recorded(simP.url, `${root}#a1`);
    expect(pMore).toEqual([]);
    expect(pReq!.headers['x-request-id']).toBe(`${root}#a1`);
    expect(pReq!.body).toEqual({
      ...chatBody(PROMPT, { max_tokens: 1, stream: false }),
      request_id: `${root}#a1`,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
      min_tokens: 1,
    });

    const d = await post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, {
        max_tokens: 6,
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        _motor_dispatch: envelope('decode', HANDOFF, ids),
        _motor_prefill_result: p.json,
      }),
    );
    expect(d.status).toBe(200);
    expect(d.headers['x-request-id']).toBe(`${root}#a1`);
    expect(d.text).not.toContain('kv_transfer_params');
    expect(d.text).not.toContain('token_ids');
    if (stream) {
      const events = sseEvents(d.text);
      expect(events.at(-1)).toBe('[DONE]');
    } else {
      expect(d.json.object).toBe('chat.completion');
      expect(d.json.usage.prompt_tokens_details.cached_tokens).toBe(p.json.usage.prompt_tokens);
    }
    // The decode engine got the payload verbatim (19).
    const [dReq] = await recorded(simD.url, `${root}#a1`);
    expect(dReq!.body.kv_transfer_params).toEqual(p.json.payload);
    expect(dReq!.body.request_id).toBe(`${root}#a1`);
    expect(Object.keys(dReq!.body).filter((k) => k.startsWith('_motor_'))).toEqual([]);
    const [ledgerP, ledgerD] = await Promise.all([idleLedger(simP.url), idleLedger(simD.url)]);
    expect(ledgerP.kv_held).toEqual([]); // the decode read the blocks
    expect(ledgerD.finished.find((f) => f.id === `${root}#a1`)).toMatchObject({
      flow: 'handoff_decode',
      outcome: 'completed',
    });
  });

  it('a 30 KB prompt: both engines get it whole (the body goes to undici as a list of buffers)', async () => {
    const root = 'handoff-long';
    const prompt = 'Spliced legs carry the prompt as views of the envelope. '.repeat(540);
    const ids = { root, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const p = await post(
      proxyP.url,
      '/v1/chat/completions',
      chatBody(prompt, { max_tokens: 1, stream: false, _motor_dispatch: envelope('prefill', HANDOFF, ids) }),
    );
    expect(p.status).toBe(200);
    const [pReq] = await recorded(simP.url, `${root}#a1`);
    expect(pReq!.body).toEqual({
      ...chatBody(prompt, { max_tokens: 1, stream: false }),
      request_id: `${root}#a1`,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
      min_tokens: 1,
    });
    const d = await post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(prompt, {
        max_tokens: 4,
        _motor_dispatch: envelope('decode', HANDOFF, ids),
        _motor_prefill_result: p.json,
      }),
    );
    expect(d.status).toBe(200);
    expect(d.json.usage.prompt_tokens_details.cached_tokens).toBe(p.json.usage.prompt_tokens);
    const [dReq] = await recorded(simD.url, `${root}#a1`);
    expect(dReq!.body).toEqual({
      ...chatBody(prompt, { max_tokens: 4 }),
      request_id: `${root}#a1`,
      kv_transfer_params: p.json.payload,
    });
  });

  it('client token ids come back only when asked for', async () => {
    const root = 'handoff-ids';
    const ids = { root, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const p = await post(
      proxyP.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { max_tokens: 1, _motor_dispatch: envelope('prefill', HANDOFF, ids) }),
    );
    const d = await post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, {
        max_tokens: 3,
        return_token_ids: true,
        _motor_dispatch: envelope('decode', HANDOFF, ids),
        _motor_prefill_result: p.json,
      }),
    );
    expect(d.status).toBe(200);
    expect(d.text).toContain('token_ids');
    expect(d.json).not.toHaveProperty('kv_transfer_params');
  });

  it('a prefill engine error passes through unchanged and stops the decode peer (peer_failed)', async () => {
    const root = 'handoff-err';
    const ids = { root, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const body = {
      ...chatBody(PROMPT),
      model: 'no-such-model',
      _motor_dispatch: envelope('prefill', HANDOFF, ids),
    };
    const direct = await post(simP.url, '/v1/chat/completions', {
      ...chatBody(PROMPT),
      model: 'no-such-model',
    });
    const r = await post(proxyP.url, '/v1/chat/completions', body);
    expect(r.status).toBe(direct.status);
    expect(r.json).toEqual(direct.json);
    // The decode proxy got a stop before the request: its tombstone refuses the late decode.
    const late = await post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { _motor_dispatch: envelope('decode', HANDOFF, ids) }),
    );
    expect(late.status).toBe(409);
    expect(late.json.error.message).toMatch(/stopped \(peer_failed\) before it arrived/);
    expect(await recorded(simD.url, `${root}#a1`)).toEqual([]);
  });

  it.each([
    ['a malformed envelope', { attempt_seq: 0 }, {}, 400, '_motor_dispatch.attempt_seq'],
    ['the wrong role', { role: 'decode' }, {}, 400, '_motor_dispatch.role'],
    ['an unsupported plan', { dispatch_mode: CONCURRENT }, {}, 400, '_motor_dispatch.dispatch_mode'],
    [
      'legacy kv_transfer_params',
      {},
      { kv_transfer_params: { do_remote_decode: true } },
      400,
      'kv_transfer_params',
    ],
    ['legacy bootstrap_room', {}, { bootstrap_room: 1 }, 400, 'bootstrap_room'],
  ])('refuses %s before the engine sees it', async (_name, envOver, bodyOver, status, param) => {
    const root = `bad-${param}`;
    const body = chatBody(PROMPT, {
      max_tokens: 1,
      ...bodyOver,
      _motor_dispatch: { ...envelope('prefill', HANDOFF, { root }), ...envOver },
    });
    const r = await post(proxyP.url, '/v1/chat/completions', body);
    expect(r.status).toBe(status);
    expect(r.json.error.param).toBe(param);
    expect(r.json.error.message).toContain(param.startsWith('_motor') ? param : `'${param}'`);
    expect(await recorded(simP.url, `${root}#a1`)).toEqual([]);
  });

  it('a handoff decode with a prefill result of another attempt is refused', async () => {
    const ids = { root: 'mismatch', prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const foreign = {
      root_request_id: 'mismatch',
      engine_request_id: 'mismatch#a1',
      pair_id: 'other-pair',
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      payload: {},
    };
    const r = await post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { _motor_dispatch: envelope('decode', HANDOFF, ids), _motor_prefill_result: foreign }),
    );
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('_motor_prefill_result');
  });
});

describe('vLLM trigger with the metaserver (conformance 20, 30)', () => {
  let simP: MotorProcess, simD: MotorProcess, proxyP: MotorProcess, proxyD: MotorProcess;
  beforeAll(() => void ({ simP, simD, proxyP, proxyD } = trigger));

  const prepare = (root: string, decodeUrl: string) =>
    post(
      proxyP.url,
      '/v1/chat/completions',
      chatBody(PROMPT, {
        max_tokens: 1,
        _motor_dispatch: envelope('prefill', CONCURRENT, { root, prefillUrl: proxyP.url, decodeUrl }),
      }),
    );
  const decode = (root: string) =>
    post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, {
        max_tokens: 5,
        _motor_dispatch: envelope('decode', CONCURRENT, {
          root,
          prefillUrl: proxyP.url,
          decodeUrl: proxyD.url,
        }),
      }),
    );

  it('prepare answers at once without computing; the metaserver call runs the prefill', async () => {
    const root = 'trigger-1';
    const p = await prepare(root, proxyD.url);
    expect(p.status).toBe(200);
    expect(p.json).toMatchObject({ status: 'prepared', handoff_mode: 'trigger', payload: {}, usage: null });
    expect(p.json.expires_at_ms).toBeGreaterThan(Date.now());
    expect(await recorded(simP.url, `${root}#a1`)).toEqual([]); // nothing computed yet

    const d = await decode(root);
    expect(d.status).toBe(200);
    expect(d.json.choices[0].message.content.length).toBeGreaterThan(0);
    expect(d.text).not.toContain('kv_transfer_params');

    const [dReq] = await recorded(simD.url, `${root}#a1`);
    expect(dReq!.body.kv_transfer_params).toEqual({
      do_remote_decode: false,
      do_remote_prefill: true,
      metaserver: `${proxyP.url}/v1/metaserver`,
    });
    const [pReq, ...more] = await recorded(simP.url, `${root}#a1`);
    expect(more).toEqual([]);
    // the connector's body (newest vllm-ascend: external id, per-group block sizes) reaches the prefill verbatim
    expect(pReq!.body.kv_transfer_params).toMatchObject({
      request_id: `chatcmpl-${root}#a1`,
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_block_ids: expect.any(Array),
      remote_block_size: [16],
      remote_engine_id: expect.any(String),
      remote_host: '127.0.0.1',
      remote_port: Number(new URL(simD.url).port),
      remote_cached_tokens: expect.any(Number),
    });
    expect((await idleLedger(simP.url)).finished.find((f) => f.id === `${root}#a1`)).toMatchObject({
      flow: 'trigger_prefill',
      outcome: 'completed',
    });
    // Conformance 29 after completion.
    const stop = await post(proxyP.url, '/v1/dispatch/stop', {
      root_request_id: root,
      attempt_seq: 1,
      pair_id: `pair-${root}`,
    });
    expect(stop.json.state).toBe('already_done');
  });

  it('a metaserver call that arrives before its prepare waits for it', async () => {
    const root = 'trigger-late';
    const pending = decode(root);
    await until(
      async () => (await http(proxyP.url, 'GET', '/debug/state')).json.metaserver_waiting === 1,
      'the metaserver call to wait',
    );
    expect((await prepare(root, proxyD.url)).status).toBe(200);
    expect((await pending).status).toBe(200);
  });

  it('an unknown request id waits a bounded time, then 404', async () => {
    const started = Date.now();
    const r = await post(proxyP.url, '/v1/metaserver', {
      request_id: 'nobody#a1',
      do_remote_decode: true,
      remote_block_ids: [1],
      remote_block_size: 16,
      remote_engine_id: 'e',
      remote_host: '127.0.0.1',
      remote_port: 1,
      remote_cached_tokens: 0,
    });
    expect(r.status).toBe(404);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect(r.json.error.param).toBe('request_id');
  });

  it('missing KV fields → 400 naming the field, and a stop to the peer', async () => {
    const root = 'trigger-bad';
    expect((await prepare(root, peer.url)).status).toBe(200);
    const r = await post(proxyP.url, '/v1/metaserver', { request_id: `${root}#a1`, do_remote_decode: true });
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('remote_block_ids');
    await peer.received(1);
    expect(peer.requests[0]).toMatchObject({
      method: 'POST',
      path: '/v1/dispatch/stop',
      body: { root_request_id: root, attempt_seq: 1, pair_id: `pair-${root}`, reason: 'peer_failed' },
    });
    expect(await recorded(simP.url, `${root}#a1`)).toEqual([]);
  });

  it('a prepared prefill nobody consumes expires (30)', async () => {
    const root = 'trigger-expire';
    const p = await prepare(root, proxyD.url);
    expect(p.status).toBe(200);
    expect((await http(proxyP.url, 'GET', '/debug/state')).json.prepared_prefills).toBeGreaterThanOrEqual(1);
    await until(
      async () => (await http(proxyP.url, 'GET', '/debug/state')).json.prepared_prefills === 0,
      'the prepared prefill to expire',
    );
    expect(Date.now()).toBeGreaterThanOrEqual(p.json.expires_at_ms);
    const stop = await post(proxyP.url, '/v1/dispatch/stop', {
      root_request_id: root,
      attempt_seq: 1,
      pair_id: `pair-${root}`,
    });
    expect(stop.json).toMatchObject({
      state: 'already_stopped',
      message: expect.stringContaining('expired'),
    });
    const metrics = (await http(proxyP.url, 'GET', '/metrics')).text;
    expect(metrics).toMatch(
      /motor_proxy_dispatches_total\{role="prefill",leg="trigger_prefill",outcome="expired"\} [1-9]/,
    );
    expect(metrics).toMatch(/motor_proxy_metaserver_wait_seconds_count\{outcome="after_wait"\} [1-9]/);
  });
});

describe('SGLang bootstrap through two proxies (conformance 21)', () => {
  let simP: MotorProcess, simD: MotorProcess, proxyP: MotorProcess, proxyD: MotorProcess;
  beforeAll(() => void ({ simP, simD, proxyP, proxyD } = boot));

  it('both legs get the same room, the prefill host and the bootstrap port its engine reports', async () => {
    // The proxy learns it from the engine's /server_info (never the HTTP port).
    const reported = (await http(simP.url, 'GET', '/server_info')).json
      .disaggregation_bootstrap_port as number;
    expect(reported).not.toBe(Number(new URL(simP.url).port));
    const root = 'boot-1';
    const pair = 'pair-boot-1';
    const ids = { root, pair, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const [p, d] = await Promise.all([
      post(
        proxyP.url,
        '/v1/chat/completions',
        chatBody(PROMPT, { max_tokens: 1, _motor_dispatch: envelope('prefill', CONCURRENT, ids) }),
      ),
      post(
        proxyD.url,
        '/v1/chat/completions',
        chatBody(PROMPT, { max_tokens: 4, _motor_dispatch: envelope('decode', CONCURRENT, ids) }),
      ),
    ]);
    expect(p.status).toBe(200);
    expect(p.json).toMatchObject({ status: 'completed', handoff_mode: 'bootstrap', pair_id: pair });
    expect(d.status).toBe(200);
    expect(d.json.choices[0].message.content.length).toBeGreaterThan(0);
    const room = bootstrapRoomFor(pair, 1).toString();
    const [pReq] = await recorded(simP.url, `${root}#a1`);
    const [dReq] = await recorded(simD.url, `${root}#a1`);
    for (const req of [pReq!, dReq!]) {
      expect(String(req.body.bootstrap_room)).toBe(room);
      expect(req.body).toMatchObject({
        rid: `${root}#a1`,
        bootstrap_host: '127.0.0.1',
        bootstrap_port: reported,
      });
    }
    const info = await http(proxyP.url, 'GET', '/v1/motor/info');
    expect(info.json).toMatchObject({
      engine: 'sglang',
      role: 'prefill',
      dispatch_capabilities: ['concurrent_engine_sync'],
      bootstrap: { host: '127.0.0.1', port: reported },
    });
  });

  it('a stop aborts an SGLang decode through /abort_request and the ledger shows nothing left running', async () => {
    const root = 'boot-stop';
    const ids = { root, prefillUrl: proxyP.url, decodeUrl: proxyD.url };
    const pending = post(
      proxyD.url,
      '/v1/chat/completions',
      chatBody(PROMPT, { _motor_dispatch: envelope('decode', CONCURRENT, ids) }),
    );
    await until(
      async () => (await idleLedger(simD.url, 0)).in_flight.some((e) => e.id === `${root}#a1`),
      'the decode to wait for its prefill',
    );
    const stop = await post(proxyD.url, '/v1/dispatch/stop', {
      root_request_id: root,
      engine_request_id: `${root}#a1`,
      attempt_seq: 1,
      pair_id: `pair-${root}`,
      reason: 'timeout',
    });
    expect(stop.json).toMatchObject({ accepted: true, state: 'stopped' });
    expect((await pending).status).toBe(409);
    const ledger = await idleLedger(simD.url);
    expect(ledger.in_flight).toEqual([]);
    expect(ledger.finished.find((f) => f.id === `${root}#a1`)).toMatchObject({ outcome: 'aborted' });
    const aborts = (await recorded(simD.url)).filter((r) => r.path === '/abort_request');
    expect(aborts.map((r) => r.body)).toContainEqual({ rid: `${root}#a1` });
  });
});
