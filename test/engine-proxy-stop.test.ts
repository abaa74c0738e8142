import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
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

/** Conformance 29 (stop state machine, tombstones, bounded memory), peer stops behind --peer-allow, pass-through, health. */

const PROMPT = 'Stops must abort the engine request and leave nothing running.';
const nixl = engineConfigFile('stop-nixl', { kv_transfer_config: { kv_connector: 'NixlConnector' } });
const layerwise = engineConfigFile('stop-layerwise', {
  kv_transfer_config: { kv_connector: 'MooncakeLayerwiseConnector' },
});
const unknown = engineConfigFile('stop-unknown', { kv_transfer_config: { kv_connector: 'FancyConnector' } });

let simU: MotorProcess, simHang: MotorProcess;
let proxyU: MotorProcess, proxyHang: MotorProcess, proxyStrict: MotorProcess, proxyDead: MotorProcess;
let proxyTriggerD: MotorProcess;
let allowed: RecordingServer, forbidden: RecordingServer;
const procs: MotorProcess[] = [];

const proxyArgs = (engineUrl: string, role: string, ...rest: string[]) => [
  'engine-proxy',
  '--engine-url',
  engineUrl,
  '--role',
  role,
  ...rest,
];

beforeAll(async () => {
  [allowed, forbidden] = await Promise.all([recordingServer(), recordingServer()]);
  const sims = await Promise.all([
    start(['sim', '--time-scale', '0']),
    start(['sim', '--time-scale', '0', '--fault-hang-ms', '-1']),
  ]);
  procs.push(...sims);
  [simU, simHang] = sims as [MotorProcess, MotorProcess];
  const proxies = await Promise.all([
    start(proxyArgs(simU.url, 'union')),
    start(proxyArgs(simHang.url, 'union')),
    start(
      proxyArgs(
        simU.url,
        'prefill',
        '--engine-config',
        nixl,
        '--peer-allow',
        allowed.url,
        '--max-tracked-attempts',
        '5',
        '--stop-ttl-ms',
        '400',
      ),
    ),
    start(proxyArgs('http://127.0.0.1:1', 'union')),
    start(proxyArgs(simU.url, 'decode', '--engine-config', layerwise, '--peer-allow', allowed.url)),
  ]);
  procs.push(...proxies);
  [proxyU, proxyHang, proxyStrict, proxyDead, proxyTriggerD] = proxies as [
    MotorProcess,
    MotorProcess,
    MotorProcess,
    MotorProcess,
    MotorProcess,
  ];
}, 120_000);

afterAll(async () => {
  await Promise.all([...procs.map((p) => p.stop()), allowed?.close(), forbidden?.close()]);
});

const single = (root: string, extra: Record<string, unknown> = {}) =>
  chatBody(PROMPT, { max_tokens: 4, ...extra, _motor_dispatch: envelope('single', 'single', { root }) });

const stop = (base: string, root: string, over: Record<string, unknown> = {}) =>
  post(base, '/v1/dispatch/stop', {
    root_request_id: root,
    engine_request_id: `${root}#a1`,
    attempt_seq: 1,
    pair_id: `pair-${root}`,
    reason: 'client_disconnect',
    ...over,
  });

async function inFlight(simUrl: string, id: string): Promise<void> {
  await until(
    async () => (await idleLedger(simUrl, 0)).in_flight.some((e) => e.id === id),
    `${id} in flight`,
  );
}

describe('POST /v1/dispatch/stop (conformance 29)', () => {
  it.each([false, true])(
    'stops an active attempt (stream=%s): engine aborted, then already_stopped',
    async (stream) => {
      const root = `active-${stream}`;
      const pending = post(
        proxyHang.url,
        '/v1/chat/completions',
        single(root, stream ? { stream: true } : {}),
      );
      await inFlight(simHang.url, `${root}#a1`);
      const first = await stop(proxyHang.url, root);
      expect(first.status).toBe(200);
      expect(first.json).toEqual({
        root_request_id: root,
        attempt_seq: 1,
        accepted: true,
        state: 'stopped',
        message: expect.any(String),
      });
      const r = await pending;
      expect(r.status).toBe(409);
      expect(r.json.error.code).toBe('dispatch_stopped');
      expect((await stop(proxyHang.url, root)).json).toMatchObject({
        accepted: true,
        state: 'already_stopped',
      });
      const ledger = await idleLedger(simHang.url);
      expect(ledger.in_flight).toEqual([]);
      expect(ledger.finished.find((f) => f.id === `${root}#a1`)).toMatchObject({ outcome: 'aborted' });
    },
  );

  it('a stop naming another pair or engine request id is stale and aborts nothing', async () => {
    const root = 'stale';
    const pending = post(proxyHang.url, '/v1/chat/completions', single(root));
    await inFlight(simHang.url, `${root}#a1`);
    expect((await stop(proxyHang.url, root, { pair_id: 'someone-else' })).json).toMatchObject({
      accepted: false,
      state: 'stale',
    });
    expect((await stop(proxyHang.url, root, { engine_request_id: `${root}#a7` })).json.state).toBe('stale');
    expect((await idleLedger(simHang.url, 0)).in_flight.map((e) => e.id)).toContain(`${root}#a1`);
    expect((await stop(proxyHang.url, root)).json.state).toBe('stopped');
    expect((await pending).status).toBe(409);
    expect((await idleLedger(simHang.url)).in_flight).toEqual([]);
  });

  it('a stop after completion → already_done', async () => {
    const root = 'done';
    const r = await post(proxyU.url, '/v1/chat/completions', single(root));
    expect(r.status).toBe(200);
    expect((await stop(proxyU.url, root)).json).toMatchObject({ accepted: true, state: 'already_done' });
  });

  it('an unknown attempt → not_found, and the late request is refused (tombstone)', async () => {
    const root = 'early-stop';
    expect((await stop(proxyU.url, root, { reason: 'peer_failed' })).json).toMatchObject({
      accepted: false,
      state: 'not_found',
    });
    const late = await post(proxyU.url, '/v1/chat/completions', single(root));
    expect(late.status).toBe(409);
    expect(late.json.error.message).toMatch(/stopped \(peer_failed\) before it arrived/);
    expect(await recorded(simU.url, `${root}#a1`)).toEqual([]);
    expect((await stop(proxyU.url, root)).json.state).toBe('already_stopped');
  });

  it('a client disconnect aborts the engine request and counts as stopped', async () => {
    const root = 'disconnect';
    const ctl = new AbortController();
    const pending = request(`${proxyHang.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(single(root, { stream: true })),
      signal: ctl.signal,
    }).catch((err: unknown) => err);
    await inFlight(simHang.url, `${root}#a1`);
    ctl.abort();
    await pending;
    const ledger = await idleLedger(simHang.url);
    expect(ledger.in_flight).toEqual([]);
    expect(ledger.finished.find((f) => f.id === `${root}#a1`)).toMatchObject({ outcome: 'aborted' });
    const again = await stop(proxyHang.url, root);
    expect(again.json).toMatchObject({
      state: 'already_stopped',
      message: expect.stringContaining('client_disconnect'),
    });
  });

  it.each([
    ['missing pair_id', { pair_id: undefined }, 'pair_id'],
    ['attempt_seq 0', { attempt_seq: 0 }, 'attempt_seq'],
    ['empty root', { root_request_id: '' }, 'root_request_id'],
  ])('refuses a stop with %s (400 naming the field)', async (_name, over, param) => {
    const r = await stop(proxyU.url, 'bad-stop', over);
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe(param);
  });

  it('unknown reasons count as other; stops are counted by reason and state', async () => {
    await stop(proxyU.url, 'reason-x', { reason: 'cosmic_rays' });
    const text = (await http(proxyU.url, 'GET', '/metrics')).text;
    expect(text).toMatch(/motor_proxy_stops_total\{reason="other",state="not_found"\} [1-9]/);
    expect(text).toMatch(/motor_proxy_stops_total\{reason="client_disconnect",state="already_done"\} [1-9]/);
    expect(text).toMatch(
      /motor_proxy_dispatches_total\{role="single",leg="single",outcome="completed"\} [1-9]/,
    );
  });

  it('memory is bounded: tombstones are capped and expire (conformance 30)', async () => {
    for (let i = 0; i < 20; i++)
      expect((await stop(proxyStrict.url, `flood-${i}`)).json.state).toBe('not_found');
    expect((await http(proxyStrict.url, 'GET', '/debug/state')).json.attempts_tracked).toBe(5);
    // The newest tombstone survives the cap; the oldest is gone.
    expect((await stop(proxyStrict.url, 'flood-19')).json.state).toBe('already_stopped');
    expect((await stop(proxyStrict.url, 'flood-0')).json.state).toBe('not_found');
    await until(
      async () => (await http(proxyStrict.url, 'GET', '/debug/state')).json.attempts_tracked === 0,
      'tombstones to expire',
    );
  });
});

describe('peer stops only to allowed peers (no SSRF)', () => {
  const failingPrefill = (root: string, decodeUrl: string) =>
    post(proxyStrict.url, '/v1/chat/completions', {
      ...chatBody(PROMPT, { max_tokens: 1 }),
      model: 'no-such-model',
      _motor_dispatch: envelope('prefill', 'prefill_handoff_decode', { root, decodeUrl }),
    });

  it('on its own failure the proxy stops an allowed peer with peer_failed', async () => {
    const r = await failingPrefill('ssrf-ok', allowed.url);
    expect(r.status).toBe(404); // the engine's answer, unchanged
    expect(allowed.requests).toContainEqual({
      method: 'POST',
      path: '/v1/dispatch/stop',
      body: expect.objectContaining({
        root_request_id: 'ssrf-ok',
        reason: 'peer_failed',
        pair_id: 'pair-ssrf-ok',
      }),
    });
  });

  it.each([
    ['a port not in the list', () => forbidden.url],
    ['a metadata address', () => 'http://169.254.169.254'],
    ['a non-http scheme', () => 'file:///etc/passwd'],
  ])('refuses to call %s named by an envelope', async (_name, target) => {
    const before = forbidden.requests.length;
    const r = await failingPrefill(`ssrf-${_name}`, target());
    expect(r.status).toBe(404);
    expect(forbidden.requests.length).toBe(before);
    const text = (await http(proxyStrict.url, 'GET', '/metrics')).text;
    expect(text).toMatch(/motor_proxy_peer_refused_total\{use="stop"\} [1-9]/);
  });

  it('a trigger decode naming a metaserver outside the allow-list is refused before the engine sees it', async () => {
    const root = 'ssrf-metaserver';
    const r = await post(proxyTriggerD.url, '/v1/chat/completions', {
      ...chatBody(PROMPT),
      _motor_dispatch: envelope('decode', 'concurrent_engine_sync', { root, prefillUrl: forbidden.url }),
    });
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('_motor_dispatch.endpoints.prefill.url');
    expect(await recorded(simU.url, `${root}#a1`)).toEqual([]);
  });
});

describe('pass-through, single, health, start-up', () => {
  it.each([false, true])(
    'without an envelope the body reaches the engine unchanged (stream=%s)',
    async (stream) => {
      const body = chatBody(PROMPT, { max_tokens: 5, stream, seed: 7, custom_field: { keep: [1, 2] } });
      const [viaProxy, direct] = await Promise.all([
        post(proxyU.url, '/v1/chat/completions', body, { 'x-request-id': `pt-${stream}` }),
        post(simU.url, '/v1/chat/completions', body),
      ]);
      expect(viaProxy.status).toBe(200);
      const [rec] = await recorded(simU.url, `pt-${stream}`);
      expect(rec!.body).toEqual(body);
      if (stream) {
        const content = (t: string) =>
          sseEvents(t)
            .filter((e): e is { choices: Array<{ delta: { content?: string } }> } => e !== '[DONE]')
            .map((e) => e.choices[0]?.delta.content ?? '')
            .join('');
        expect(content(viaProxy.text)).toBe(content(direct.text));
      } else {
        expect(viaProxy.json.choices).toEqual(direct.json.choices);
      }
    },
  );

  it('single on a union proxy: request_id and X-Request-Id set, no internal fields back', async () => {
    const r = await post(proxyU.url, '/v1/chat/completions', single('single-1'));
    expect(r.status).toBe(200);
    expect(r.headers['x-request-id']).toBe('single-1#a1');
    expect(r.text).not.toMatch(/kv_transfer_params|_motor_|token_ids/);
    const [rec] = await recorded(simU.url, 'single-1#a1');
    expect(rec!.body.request_id).toBe('single-1#a1');
    expect(rec!.body).not.toHaveProperty('_motor_dispatch');
    const wrongRole = await post(proxyU.url, '/v1/chat/completions', {
      ...chatBody(PROMPT),
      _motor_dispatch: envelope('prefill', 'prefill_handoff_decode', { root: 'single-2' }),
    });
    expect(wrongRole.status).toBe(400);
    expect(wrongRole.json.error.param).toBe('_motor_dispatch.role');
  });

  it("GET /v1/motor/engine-metrics serves the engine's metrics; /metrics stays the proxy's own", async () => {
    const engine = await http(proxyU.url, 'GET', '/v1/motor/engine-metrics');
    expect(engine.status).toBe(200);
    expect(engine.text).toMatch(/^vllm:num_requests_running\{/m);
    expect((await http(proxyU.url, 'GET', '/metrics')).text).not.toMatch(/^vllm:/m);
  });

  it('GET /health reflects the engine', async () => {
    expect((await http(proxyU.url, 'GET', '/health')).status).toBe(200);
    expect((await http(proxyDead.url, 'GET', '/health')).status).toBe(503);
    expect((await post(proxyDead.url, '/v1/chat/completions', chatBody(PROMPT))).status).toBe(502);
  });

  it('refuses to start with no capability for a P/D role, no engine config, or a malformed --peer-allow', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--role', 'prefill', '--engine-config', unknown], /no dispatch capability/],
      [['--role', 'decode'], /--engine-config is required/],
      [['--role', 'union', '--peer-allow', 'example.com'], /--peer-allow/],
    ];
    await Promise.all(
      cases.map(([args, message]) =>
        expect(start(['engine-proxy', '--engine-url', simU.url, ...args])).rejects.toThrow(message),
      ),
    );
  });
});
