import { afterEach, describe, expect, it } from 'vitest';
import { PEER_SECRET_HEADER, PeerSecrets } from '../common/peer-secrets.js';
import { engineReply, hangUntilAborted, unreachable } from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

/**
 * Issue 15 finding 3: with a peer secret, only the coordinator and peer proxies may dispatch, stop,
 * pass through, or run a trigger prefill; health, metrics and info stay open.
 */

const SECRET = 'the-current-peer-secret';
const PREVIOUS = 'the-previous-peer-secret';
const AUTH = { [PEER_SECRET_HEADER]: SECRET };
const TRIGGER = 'concurrent_engine_sync';
const MESSAGES = [{ role: 'user', content: 'hi' }];

/** A holder of another secret: its tokens must not open this proxy's prefills. */
const OTHER = await PeerSecrets.load({ secrets: ['some-other-secret-value'] });

let proxy: InProcessProxy;
let secrets: PeerSecrets;
afterEach(async () => {
  await proxy.close();
  secrets?.close();
});

async function start(
  role: 'prefill' | 'decode' | 'union',
  engine: Parameters<typeof startInProcessProxy>[1],
  list = [SECRET],
): Promise<void> {
  secrets = await PeerSecrets.load({ secrets: list });
  const caps = role === 'union' ? [] : ['prefill_handoff_decode', TRIGGER];
  proxy = await startInProcessProxy({ role, dispatchCapabilities: caps }, engine, undefined, {
    peerSecrets: secrets,
  });
}

const stopOf = (root: string) => ({
  root_request_id: root,
  engine_request_id: `${root}#a1`,
  pair_id: `pair-${root}`,
  attempt_seq: 1,
  reason: 'client_disconnect',
});
const single = (root: string) => ({
  model: 'm',
  messages: MESSAGES,
  _motor_dispatch: envelope('single', 'prefill_handoff_decode', { root }),
});
const UNAUTHENTICATED =
  '{"error":{"message":"missing or wrong x-motor-peer-secret","type":"authentication_error","param":null,"code":null}}';

describe('peer secret on the proxy routes', () => {
  const guarded: Array<{ name: string; path: string; body: unknown; route: string }> = [
    { name: 'stop', path: '/v1/dispatch/stop', body: stopOf('s1'), route: 'stop' },
    { name: 'envelope', path: '/v1/chat/completions', body: single('s1'), route: 'dispatch' },
    { name: 'completions', path: '/v1/completions', body: { model: 'm', prompt: 'x' }, route: 'dispatch' },
    { name: 'pass-through', path: '/tokenize', body: { prompt: 'x' }, route: 'pass_through' },
  ];
  const presented: Array<{ name: string; headers: Record<string, string> }> = [
    { name: 'no secret', headers: {} },
    { name: 'a wrong secret', headers: { [PEER_SECRET_HEADER]: 'guess-guess-guess-guess' } },
    { name: 'a prefix of the secret', headers: { [PEER_SECRET_HEADER]: SECRET.slice(0, -1) } },
    { name: 'an empty secret', headers: { [PEER_SECRET_HEADER]: '' } },
  ];
  const cases = guarded.flatMap((g) => presented.map((p) => ({ ...g, who: p.name, headers: p.headers })));

  it.each(cases)('$name with $who → 401, nothing reaches the engine', async (row) => {
    await start('union', () => engineReply(200, { id: 'x' }));
    const res = await proxy.call('POST', row.path, row.body, { headers: row.headers });
    expect(res.status).toBe(401);
    expect(res.text).toBe(UNAUTHENTICATED);
    expect(res.headers.connection).toBe('close');
    expect(proxy.engine.requests).toEqual([]);
    expect(await proxy.metric(`motor_proxy_unauthenticated_total{route="${row.route}"}`)).toBe(1);
  });

  it('a stop without the secret leaves the attempt running; with it, stops it', async () => {
    await start('union', hangUntilAborted);
    const pending = proxy.call('POST', '/v1/chat/completions', single('s2'), { headers: AUTH });
    await proxy.engine.received(1);
    const forged = await proxy.call('POST', '/v1/dispatch/stop', stopOf('s2'));
    expect(forged.status).toBe(401);
    expect(proxy.engine.requests[0]!.signal?.aborted).toBe(false);
    const real = await proxy.call('POST', '/v1/dispatch/stop', stopOf('s2'), { headers: AUTH });
    expect(real.json).toMatchObject({ accepted: true, state: 'stopped' });
    expect((await pending).status).toBe(409);
  });

  it('the secret is never forwarded to the engine', async () => {
    await start('union', () => engineReply(200, { id: 'x' }));
    expect((await proxy.call('POST', '/v1/chat/completions', single('s3'), { headers: AUTH })).status).toBe(
      200,
    );
    expect((await proxy.call('POST', '/tokenize', { prompt: 'x' }, { headers: AUTH })).status).toBe(200);
    expect(proxy.engine.requests).toHaveLength(2);
    for (const r of proxy.engine.requests) expect(Object.keys(r.headers)).not.toContain(PEER_SECRET_HEADER);
  });

  it.each([
    '/health',
    '/metrics',
    '/v1/motor/info',
    '/v1/motor/engine-metrics',
    '/v1/models',
    '/debug/state',
  ])('GET %s stays open', async (path) => {
    await start('union', () => engineReply(200, { data: [] }));
    expect((await proxy.call('GET', path)).status).toBe(200);
  });

  it('accepts every listed secret (current and previous)', async () => {
    await start('union', () => engineReply(200, { id: 'x' }), [SECRET, PREVIOUS]);
    for (const secret of [SECRET, PREVIOUS]) {
      const res = await proxy.call('POST', '/v1/dispatch/stop', stopOf(secret), {
        headers: { [PEER_SECRET_HEADER]: secret },
      });
      expect(res.status).toBe(200);
    }
  });

  it('a stop of the peer leg carries the secret', async () => {
    await start('prefill', unreachable);
    const res = await proxy.call(
      'POST',
      '/v1/chat/completions',
      {
        model: 'm',
        messages: MESSAGES,
        _motor_dispatch: envelope('prefill', 'prefill_handoff_decode', {
          root: 's4',
          prefillUrl: PREFILL_PEER,
          decodeUrl: DECODE_PEER,
        }),
      },
      { headers: AUTH },
    );
    expect(res.status).toBe(502);
    expect(proxy.peers.calls).toMatchObject([
      { origin: DECODE_PEER, path: '/v1/dispatch/stop', headers: { [PEER_SECRET_HEADER]: SECRET } },
    ]);
  });
});

describe('per-attempt metaserver URL', () => {
  const prepare = (root: string) =>
    proxy.call(
      'POST',
      '/v1/chat/completions',
      {
        model: 'm',
        messages: MESSAGES,
        _motor_dispatch: envelope('prefill', TRIGGER, {
          root,
          prefillUrl: PREFILL_PEER,
          decodeUrl: DECODE_PEER,
        }),
      },
      { headers: AUTH },
    );
  const kv = (root: string) => ({
    request_id: `${root}#a1`,
    do_remote_decode: true,
    remote_block_ids: [4, 5],
    remote_block_size: 16,
    remote_engine_id: 'engine-d',
    remote_host: '10.0.0.6',
    remote_port: 7000,
  });
  const urlOf = (id: string, token: string) => `/v1/metaserver/${encodeURIComponent(id)}/${token}`;

  it('the decode proxy names <prefill>/v1/metaserver/<id>/<token>, the token keyed by the secret', async () => {
    await start('decode', () => engineReply(200, { id: 'x', choices: [] }));
    await proxy.call(
      'POST',
      '/v1/chat/completions',
      {
        model: 'm',
        messages: MESSAGES,
        _motor_dispatch: envelope('decode', TRIGGER, {
          root: 'u1',
          prefillUrl: PREFILL_PEER,
          decodeUrl: DECODE_PEER,
        }),
      },
      { headers: AUTH },
    );
    const sent = JSON.parse(String(proxy.engine.requests[0]!.body)) as {
      kv_transfer_params: { metaserver: string };
    };
    const token = secrets.tokenFor('u1#a1');
    expect(token).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(sent.kv_transfer_params.metaserver).toBe(`${PREFILL_PEER}${urlOf('u1#a1', token)}`);
  });

  const guesses: Array<{ name: string; path: () => string }> = [
    { name: 'the untokened route', path: () => '/v1/metaserver' },
    { name: 'a guessed token', path: () => urlOf('m1#a1', 'AAAAAAAAAAAAAAAAAAAAAA') },
    { name: "another attempt's token", path: () => urlOf('m1#a1', secrets.tokenFor('m1#a2')) },
    { name: 'a token under another secret', path: () => urlOf('m1#a1', OTHER.tokenFor('m1#a1')) },
  ];

  it.each(guesses)('$name is refused (404) and leaves the prepared prefill to its decode', async (row) => {
    await start('prefill', () => engineReply(200, { id: 'c', usage: { prompt_tokens: 3 } }));
    expect((await prepare('m1')).status).toBe(200);
    const forged = await proxy.call('POST', row.path(), kv('m1'));
    expect(forged.status).toBe(404);
    expect(forged.text).toBe(
      '{"error":{"message":"no prepared prefill for this metaserver URL","type":"not_found_error","param":null,"code":null}}',
    );
    expect(proxy.engine.requests).toEqual([]);
    expect((await proxy.call('GET', '/debug/state')).json).toMatchObject({ prepared_prefills: 1 });
    const real = await proxy.call('POST', urlOf('m1#a1', secrets.tokenFor('m1#a1')), kv('m1'));
    expect(real.status).toBe(200);
    expect(real.text).toBe('{"status":"ok"}');
    expect(proxy.engine.requests).toHaveLength(1);
  });

  it("a right URL with another attempt's request_id in the body is refused, the prefill kept", async () => {
    await start('prefill', () => engineReply(200, { id: 'c' }));
    await prepare('m2');
    const res = await proxy.call('POST', urlOf('m2#a1', secrets.tokenFor('m2#a1')), kv('other'));
    expect(res.status).toBe(400);
    expect(proxy.engine.requests).toEqual([]);
    expect((await proxy.call('GET', '/debug/state')).json).toMatchObject({ prepared_prefills: 1 });
  });
});
