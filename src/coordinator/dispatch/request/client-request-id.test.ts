import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply, type LegCall } from '../testing/dispatch-harness.js';

/** The client sees one request id: the body `id` agrees with `x-request-id` (issue 18 item 8). */

const U = [{ id: 'D', url: 'http://u.test:3', role: 'union', mode: 'direct' }];
/** vLLM's response id: `chatcmpl-` + the `X-Request-Id` the leg carried (engine-request-id.ts). */
const engineId = (call: LegCall) => `chatcmpl-${call.headers['x-request-id']}`;

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

describe('client request id', () => {
  it.each<[string, boolean, (call: LegCall) => EngineReply]>([
    [
      'stream',
      true,
      (call) => ({
        kind: 'sse',
        frames: ['Hel', 'lo'].map((content) =>
          JSON.stringify({ id: engineId(call), choices: [{ index: 0, delta: { content } }] }),
        ),
      }),
    ],
    [
      'non-stream',
      false,
      (call) => ({
        kind: 'json',
        body: { id: engineId(call), object: 'chat.completion', choices: [], kv_transfer_params: null },
      }),
    ],
  ])(
    '%s: body id is chatcmpl-<x-request-id>; the engine saw <x-request-id>#a1',
    async (_what, stream, reply) => {
      const h = new DispatchHarness({ instances: U }, { D: reply });
      harnesses.push(h);
      const res = (await h.send({ stream }))!;
      const rid = String(res.headers['x-request-id']);
      expect(h.callsTo('D')[0]!.headers['x-request-id']).toBe(`${rid}#a1`);
      const ids = [...res.text.matchAll(/"id":"([^"]*)"/g)].map((m) => m[1]);
      expect(ids.length).toBeGreaterThan(0);
      for (const id of ids) expect(id).toBe(`chatcmpl-${rid}`);
    },
  );
});
