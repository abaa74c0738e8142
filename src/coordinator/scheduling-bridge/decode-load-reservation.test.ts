import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineScript } from '../dispatch/testing/dispatch-harness.js';
import { COMPLETION, json, proxyPrefillReply } from '../dispatch/testing/engine-replies.js';

/**
 * Issue 17 item 6: a decode instance's load counts from the moment its pair is chosen, so a burst of
 * requests whose prefills are all still running spreads over the decode instances.
 */

const H = { dispatchProfile: 'handoff' };
const INSTANCES = [
  { id: 'P', url: 'http://p.test:1', role: 'prefill', ...H },
  { id: 'D0', url: 'http://d0.test:2', role: 'decode', ...H },
  { id: 'D1', url: 'http://d1.test:3', role: 'decode', ...H },
];
const BURST = 8;

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

/** A harness whose prefill engine holds every prefill until the whole burst has arrived. */
function burstHarness(prefillStatus: number) {
  const load = (h: DispatchHarness, id: string) =>
    h.scheduling.scheduler.loadTracker.get(id).inflightRequests;
  const seen = { duringPrefill: [] as number[][], atDecode: [] as number[] };
  const prefill: EngineScript = async (call, h) => {
    await h.received('P', BURST);
    seen.duringPrefill.push([load(h, 'D0'), load(h, 'D1')]);
    if (prefillStatus !== 200) return json({ error: { message: 'bad', code: prefillStatus } }, prefillStatus);
    return proxyPrefillReply(call, { handoff_mode: 'handoff', payload: { kv: 'here' } });
  };
  const decode: EngineScript = (call, h) => {
    seen.atDecode.push(load(h, call.instanceId));
    return json(COMPLETION);
  };
  const h = new DispatchHarness({ instances: INSTANCES }, { P: prefill, D0: decode, D1: decode });
  harnesses.push(h);
  return { h, seen, load: (id: string) => load(h, id) };
}

describe('decode load reserved at the pick', () => {
  it(`splits a burst of ${BURST} concurrent requests ${BURST / 2}/${BURST / 2} over two decodes, counted once`, async () => {
    const { h, seen, load } = burstHarness(200);
    const replies = await Promise.all(Array.from({ length: BURST }, () => h.send({ max_tokens: 4 })));
    expect(replies.map((r) => r?.status)).toEqual(Array(BURST).fill(200));
    expect([h.callsTo('D0').length, h.callsTo('D1').length]).toEqual([BURST / 2, BURST / 2]);
    // while every prefill runs, the decodes already carry their picks
    expect(seen.duringPrefill[0]).toEqual([BURST / 2, BURST / 2]);
    // the decode leg adopts its reservation: never counted twice
    expect(Math.max(...seen.atDecode)).toBeLessThanOrEqual(BURST / 2);
    expect([load('D0'), load('D1'), load('P')]).toEqual([0, 0, 0]);
  });

  it('releases the reservation when the prefill fails and no decode leg opens', async () => {
    const { h, seen, load } = burstHarness(400);
    const replies = await Promise.all(Array.from({ length: BURST }, () => h.send({ max_tokens: 4 })));
    expect(replies.map((r) => r?.status)).toEqual(Array(BURST).fill(400));
    expect(h.callsTo('D0').length + h.callsTo('D1').length).toBe(0);
    expect(seen.duringPrefill[0]).toEqual([BURST / 2, BURST / 2]);
    expect([load('D0'), load('D1'), load('P')]).toEqual([0, 0, 0]);
  });
});
