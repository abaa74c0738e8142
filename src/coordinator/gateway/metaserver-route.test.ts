import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody, loadEngineFixture } from '../../../test/fixtures/engines/load.js';
import { DispatchHarness, type EngineReply, type LegCall } from '../dispatch/testing/dispatch-harness.js';
import { METASERVER_MAX_BODY_BYTES, metaserverRoute } from './metaserver-route.js';

/**
 * Direct trigger: the coordinator's `/v1/metaserver/:token` against what vllm-ascend's layer-wise connector
 * really sends. The connector ignores the answer and waits for KV (fixture README fact 5), so the
 * fake decode engine here does too: it streams only when its prefill ran, else it hangs — until
 * the coordinator aborts it. The first-token timeout is a minute, far beyond the test's bound: a
 * decode leg left waiting fails the test.
 */

const CONFIG = {
  server: { publicUrl: 'http://coordinator.test' },
  instances: [
    { id: 'P', url: 'http://p.test:1', role: 'prefill', dispatchProfile: 'trigger', mode: 'direct' },
    { id: 'D', url: 'http://d.test:2', role: 'decode', dispatchProfile: 'trigger', mode: 'direct' },
  ],
  timeouts: { firstTokenMs: 60_000 },
};
const STREAM: EngineReply = {
  kind: 'sse',
  frames: [JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content: 'ok' } }] })],
};
const V17 = 'vllm-ascend/layerwise-v0.17/metaserver-call.chat.json';
const FIXTURE_ID = '3f9a0c1e2b7d4e5f8a6b9c0d1e2f3a4b';

/** A fixture's metaserver body for the decode leg `call`: vLLM's external id around its X-Request-Id. */
function metaserverBody(path: string, call: LegCall): Record<string, unknown> {
  const body = fixtureBody(path);
  const id = String(body.request_id).replace(FIXTURE_ID, call.headers['x-request-id']!);
  return { ...body, request_id: id };
}

interface MetaserverAnswer {
  status: number;
  body: unknown;
}

let server: Server | null = null;
let harness: DispatchHarness | null = null;
afterEach(async () => {
  await harness?.close();
  server?.closeAllConnections();
  if (server) await new Promise((r) => server!.close(r));
  server = harness = null;
});

/** Posts `body` to a metaserver path of the loopback route. */
type Post = (path: string, body: unknown) => Promise<MetaserverAnswer>;

/** The metaserver path Motor gave the decode leg `call` (its URL is on the harness's public URL). */
function metaserverPath(call: LegCall): string {
  return new URL((call.body.kv_transfer_params as { metaserver: string }).metaserver).pathname;
}

/** The coordinator's metaserver route on loopback (`/v1/metaserver/:token`), over the harness's triggers. */
async function startMetaserver(h: DispatchHarness): Promise<Post> {
  const route = metaserverRoute({ triggers: h.triggers, scheduling: h.scheduling });
  server = createServer((req, res) => {
    const token = /^\/v1\/metaserver\/([^/]+)$/.exec(req.url ?? '')?.[1];
    void route(req, res, token === undefined ? {} : { token });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return async (path, body) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
}

/**
 * Runs one client request. The decode engine's connector posts `bodyFor(call, n)` (n: the decode
 * leg's number) to its leg's metaserver URL and, like the real engine, ignores the answer; it
 * streams only when a prefill leg of its attempt was answered 200 (its KV arrived). `before` runs
 * first, as another caller racing the connector (an attacker who read the root id).
 */
async function run(
  bodyFor: (call: LegCall, n: number) => unknown,
  prefill: (n: number) => EngineReply = () => ({ kind: 'json', body: { id: 'p' } }),
  before?: (post: Post, call: LegCall) => Promise<void>,
) {
  const answers: MetaserverAnswer[] = [];
  let decodes = 0;
  let prefills = 0;
  const h = new DispatchHarness(CONFIG, {
    P: () => prefill(prefills++),
    D: async (call, self): Promise<EngineReply> => {
      const n = decodes++;
      await before?.(post, call);
      answers.push(await post(metaserverPath(call), bodyFor(call, n)));
      const kvArrived = await Promise.all(
        self
          .callsTo('P')
          .filter((p) => p.headers['x-request-id'] === call.headers['x-request-id'])
          .map((p) => p.reply),
      ).then((replies) => replies.some((r) => r.kind === 'json' && (r.status ?? 200) === 200));
      return kvArrived ? STREAM : { kind: 'hang' };
    },
  });
  harness = h;
  const post = await startMetaserver(h); // (the decode script runs only after this)
  const reply = await h.send({ stream: true, max_tokens: 8 });
  return { h, reply, answers, post };
}

// A decode left waiting for KV would hang until firstTokenMs (60 s): bound each case well below it.
describe('direct-mode metaserver', { timeout: 5_000 }, () => {
  it.each([
    'vllm-ascend/layerwise-v0.13/metaserver-call.chat.json',
    'vllm-ascend/layerwise-v0.14/metaserver-call.chat.json',
    'vllm-ascend/layerwise-v0.15/metaserver-call.chat.json',
    V17,
    'vllm-ascend/layerwise-v0.17/metaserver-call.full-prefix-hit.json',
  ])('%s: vLLM id matched, body verbatim to the prefill, {"status":"ok"}', async (path) => {
    const { h, reply, answers } = await run((call) => metaserverBody(path, call));
    expect(reply?.status).toBe(200);
    const ok = loadEngineFixture('vllm-ascend/layerwise-v0.17/metaserver-response.ok.json');
    expect(answers).toEqual([{ status: ok.status, body: ok.body }]);
    const prefill = h.callsTo('P')[0]!;
    const sent = metaserverBody(path, h.callsTo('D')[0]!);
    expect(prefill.body.kv_transfer_params).toEqual({
      ...sent,
      do_remote_decode: true,
      do_remote_prefill: false,
    });
    expect(prefill.body).toMatchObject({ stream: false, max_tokens: 1, min_tokens: 1 });
    expect(prefill.headers['x-request-id']).toBe(h.callsTo('D')[0]!.headers['x-request-id']);
  });

  it("an invalid body under vLLM's id fails the attempt at once: decode aborted, retried", async () => {
    const { h, reply, answers } = await run((call, n) => {
      const body = metaserverBody(V17, call);
      if (n === 0) delete body.remote_port;
      return body;
    });
    expect(reply?.status).toBe(200);
    expect(answers.map((a) => a.status)).toEqual([400, 200]);
    expect(h.callsTo('D')).toHaveLength(2);
    expect(h.callsTo('D')[0]!.aborted).toBe(true);
    expect(h.callsTo('P')).toHaveLength(1); // the invalid call ran no prefill
  });

  it('a failed prefill answers 502 and fails the attempt at once: decode aborted, retried', async () => {
    const { h, reply, answers } = await run(
      (call) => metaserverBody(V17, call),
      (n) =>
        n === 0
          ? { kind: 'json', status: 500, body: { error: { message: 'boom' } } }
          : { kind: 'json', body: {} },
    );
    expect(reply?.status).toBe(200);
    expect(answers.map((a) => a.status)).toEqual([502, 200]);
    expect(h.callsTo('D')).toHaveLength(2);
    expect(h.callsTo('D')[0]!.aborted).toBe(true);
  });

  it.each<[string, (call: LegCall) => unknown]>([
    ['too large', (call) => ({ ...metaserverBody(V17, call), pad: 'x'.repeat(METASERVER_MAX_BODY_BYTES) })],
    ['not JSON', () => '{"request_id":'],
    [
      "another attempt's request_id",
      (call) => ({ ...metaserverBody(V17, call), request_id: 'chatcmpl-other#a1' }),
    ],
  ])('a valid token with a body %s fails its attempt at once: decode aborted, retried', async (_n, bad) => {
    const { h, reply, answers } = await run((call, n) => (n === 0 ? bad(call) : metaserverBody(V17, call)));
    expect(reply?.status).toBe(200);
    expect(answers.map((a) => a.status)).toEqual([expect.any(Number), 200]);
    expect(answers[0]!.status).toBeGreaterThanOrEqual(400);
    expect(h.callsTo('D')).toHaveLength(2);
    expect(h.callsTo('D')[0]!.aborted).toBe(true);
    expect(h.callsTo('P')).toHaveLength(1);
  });

  it("a hijack (the victim's id, no or a wrong token) is a 404 that fails nothing", async () => {
    const hijacks: MetaserverAnswer[] = [];
    const { h, reply, answers, post } = await run(
      (call) => metaserverBody(V17, call),
      undefined,
      async (post, call) => {
        const evil = { ...metaserverBody(V17, call), remote_host: '6.6.6.6' };
        for (const path of ['/v1/metaserver', `/v1/metaserver/${'A'.repeat(22)}`, '/v1/metaserver/x']) {
          hijacks.push(await post(path, evil));
        }
        hijacks.push(await post(`${metaserverPath(call)}x`, evil)); // one character too many
      },
    );
    expect(hijacks.map((a) => a.status)).toEqual([404, 404, 404, 404]);
    expect(reply?.status).toBe(200);
    expect(answers.map((a) => a.status)).toEqual([200]);
    expect(h.callsTo('D')).toHaveLength(1);
    expect(h.callsTo('P')).toHaveLength(1);
    expect(h.callsTo('P')[0]!.body.kv_transfer_params).toMatchObject({
      remote_host: fixtureBody(V17).remote_host,
    });
    // a replay of the used token: 404, whoever sends it
    const replay = await post(metaserverPath(h.callsTo('D')[0]!), metaserverBody(V17, h.callsTo('D')[0]!));
    expect(replay.status).toBe(404);
  });

  it("a valid call's body is counted in admission's body budget until it is answered", async () => {
    const counted: number[] = [];
    const { h, reply } = await run(
      (call) => metaserverBody(V17, call),
      () => {
        counted.push(harness!.scheduling.admission.inflightBodyBytes);
        return { kind: 'json', body: { id: 'p' } };
      },
    );
    expect(reply?.status).toBe(200);
    const sent = Buffer.byteLength(JSON.stringify(metaserverBody(V17, h.callsTo('D')[0]!)));
    expect(counted).toEqual([sent]); // while its prefill ran
    expect(h.scheduling.admission.inflightBodyBytes).toBe(0);
  });

  it('each attempt gets its own 128-bit token in its metaserver URL', async () => {
    const { h } = await run(
      (call) => metaserverBody(V17, call),
      (n) => (n === 0 ? { kind: 'json', status: 500, body: {} } : { kind: 'json', body: {} }),
    );
    const paths = h.callsTo('D').map(metaserverPath);
    expect(paths).toHaveLength(2);
    for (const p of paths) expect(p).toMatch(/^\/v1\/metaserver\/[A-Za-z0-9_-]{22}$/);
    expect(paths[0]).not.toBe(paths[1]);
  });

  it('an unknown token answers 404 at once', async () => {
    const h = new DispatchHarness(CONFIG, {});
    harness = h;
    const post = await startMetaserver(h);
    const answer = await post(`/v1/metaserver/${'B'.repeat(22)}`, {
      ...fixtureBody(V17),
      request_id: 'chatcmpl-unknown',
    });
    const unknown = loadEngineFixture('vllm-ascend/layerwise-v0.17/metaserver-response.unknown-id.json');
    expect(answer.status).toBe(unknown.status);
  });
});
