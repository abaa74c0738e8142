import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody, loadEngineFixture } from '../../../test/fixtures/engines/load.js';
import { BodyReader } from '../../common/body-reader.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { DispatchHarness, type EngineReply, type LegCall } from '../dispatch/dispatch-harness.js';
import { metaserverRoute } from './metaserver-route.js';

/**
 * Direct trigger: the coordinator's `/v1/metaserver` against what vllm-ascend's layer-wise connector
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
  timeouts: { firstTokenMs: 60_000, metaserverWaitMs: 50 },
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

/** The coordinator's metaserver route on loopback, over the harness's pending triggers. */
async function startMetaserver(h: DispatchHarness): Promise<(body: unknown) => Promise<MetaserverAnswer>> {
  const route = metaserverRoute(
    { config: validateCoordinatorConfig(CONFIG), triggers: h.triggers },
    new BodyReader({ maxBytes: 1 << 20 }),
  );
  server = createServer((req, res) => void route(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/metaserver`;
  return async (body) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
}

/**
 * Runs one client request. The decode engine's connector posts `bodyFor(call, n)` (n: the decode
 * leg's number) and, like the real engine, ignores the answer; it streams only when a prefill leg
 * of its attempt was answered 200 (its KV arrived).
 */
async function run(
  bodyFor: (call: LegCall, n: number) => unknown,
  prefill: (n: number) => EngineReply = () => ({ kind: 'json', body: { id: 'p' } }),
) {
  const answers: MetaserverAnswer[] = [];
  let decodes = 0;
  let prefills = 0;
  const h = new DispatchHarness(CONFIG, {
    P: () => prefill(prefills++),
    D: async (call, self): Promise<EngineReply> => {
      const n = decodes++;
      answers.push(await post(bodyFor(call, n)));
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
  return { h, reply, answers };
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

  it('an unknown id answers 404 after the bounded wait', async () => {
    const h = new DispatchHarness(CONFIG, {});
    harness = h;
    const post = await startMetaserver(h);
    const answer = await post({ ...fixtureBody(V17), request_id: 'chatcmpl-unknown' });
    const unknown = loadEngineFixture('vllm-ascend/layerwise-v0.17/metaserver-response.unknown-id.json');
    expect(answer.status).toBe(unknown.status);
  });
});
