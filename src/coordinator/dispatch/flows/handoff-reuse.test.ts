import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply, type EngineScript } from '../testing/dispatch-harness.js';
import { COMPLETION, json, proxyPrefillReply } from '../testing/engine-replies.js';

/**
 * Issue 15 finding 10: a handoff whose decode cannot be reached must not prefill again on every
 * retry (each prefill pins its KV on the prefill engine for the whole lease). The retry on the same
 * prefill runs the decode with the KV already there; a decode that was reached and failed (its read
 * may have freed the KV) gets a fresh prefill as before.
 */

const USAGE = { prompt_tokens: 5, completion_tokens: 2 };
const HANDOFF = { dispatchProfile: 'handoff' };
const MODES = {
  proxy: {
    instances: [
      { id: 'P', url: 'http://p.test:1', role: 'prefill', ...HANDOFF },
      { id: 'D', url: 'http://d.test:2', role: 'decode', ...HANDOFF },
    ],
    prefill: ((call) =>
      proxyPrefillReply(call, {
        handoff_mode: 'handoff',
        payload: { kv: 'here' },
        usage: USAGE,
      })) as EngineScript,
  },
  direct: {
    instances: [
      { id: 'P', url: 'http://p.test:1', role: 'prefill', mode: 'direct', ...HANDOFF },
      { id: 'D', url: 'http://d.test:2', role: 'decode', mode: 'direct', ...HANDOFF },
    ],
    prefill: (() =>
      json({ ...COMPLETION, kv_transfer_params: { remote_engine_id: 'p' }, usage: USAGE })) as EngineScript,
  },
};

const REFUSE: EngineReply = { kind: 'refuse' };
const BUSY: EngineReply = json({ error: { message: 'overloaded' } }, 503);

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

describe.each(Object.entries(MODES))('handoff (%s): an unreachable decode', (_mode, spec) => {
  it.each([
    [
      'refused twice, then answers: one prefill, its KV used by the third decode leg',
      [REFUSE, REFUSE],
      200,
      1,
      3,
    ],
    [
      'never reachable: one prefill for all three attempts, then the error',
      [REFUSE, REFUSE, REFUSE],
      502,
      1,
      3,
    ],
    ['reached but busy (503): the next attempt prefills again', [BUSY], 200, 2, 2],
  ] as const)('%s', async (_name, decodeReplies, status, prefills, decodes) => {
    let n = 0;
    const h = new DispatchHarness(
      { instances: spec.instances, retry: { maxAttempts: 3 } },
      { P: spec.prefill, D: () => decodeReplies[n++] ?? json(COMPLETION) },
    );
    harnesses.push(h);
    const reply = await h.send({ stream: false, max_tokens: 8 });
    expect(reply?.status, reply?.text).toBe(status);
    expect(h.callsTo('P')).toHaveLength(prefills);
    expect(h.callsTo('D')).toHaveLength(decodes);
    // every decode leg got the one prefill's KV (direct: its kv_transfer_params; proxy: the result's payload)
    const kvOf = (body: Record<string, unknown>) =>
      JSON.stringify(
        body.kv_transfer_params ?? (body._motor_prefill_result as { payload?: unknown }).payload,
      );
    if (prefills === 1) expect(new Set(h.callsTo('D').map((d) => kvOf(d.body))).size).toBe(1);
  });
});
