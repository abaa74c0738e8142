import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { buildPrefillResult, type PrefillResultInput } from '../protocol/index.js';
import { engineReply } from './testing/fake-clients.js';
import {
  DECODE_PEER,
  PREFILL_PEER,
  startInProcessProxy,
  type InProcessProxy,
} from './testing/in-process-proxy.js';
import { envelope } from './testing/index.js';

/**
 * Issue 14 item 2, engine-proxy side: the prefill proxy answers what the vLLM prefill engines really
 * send (golden fixtures), and the decode proxy runs skipped and expired handoffs as plain decodes.
 */

const HANDOFF = 'prefill_handoff_decode';
const MESSAGES = [{ role: 'user', content: 'hi' }];

let proxy: InProcessProxy;
afterEach(() => proxy.close());

const prefillLeg = (root: string) => ({
  model: 'm',
  messages: MESSAGES,
  _motor_dispatch: envelope('prefill', HANDOFF, { root, prefillUrl: PREFILL_PEER, decodeUrl: DECODE_PEER }),
});
const prefillMetric = (outcome: string) =>
  proxy.metric(`motor_proxy_dispatches_total{role="prefill",leg="handoff_prefill",outcome="${outcome}"}`);

describe('handoff prefill proxy against the engines’ prefill answers', () => {
  it.each([
    ['vLLM NIXL 2026-01, EOS', 'vllm/nixl-2026-01/prefill-response.eos-null.json'],
    ['vllm-ascend Mooncake v0.13, EOS', 'vllm-ascend/mooncake-v0.13/prefill-response.eos-null.json'],
  ])('%s: kv_transfer_params null → a skipped result, not an error, peer not stopped', async (_n, path) => {
    proxy = await startInProcessProxy({}, () => engineReply(200, fixtureBody(path)));
    const res = await proxy.call('POST', '/v1/chat/completions', prefillLeg('e1'));
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      object: 'motor.prefill_result',
      status: 'skipped',
      handoff_mode: 'handoff',
      payload: {},
      expires_at_ms: null,
    });
    expect(await prefillMetric('kv_skipped')).toBe(1);
    expect(proxy.peers.calls).toEqual([]);
  });

  it.each([
    ['vLLM NIXL 2026-01: the 480 s abort timeout', 'vllm/nixl-2026-01/prefill-response.chat.json', 480_000],
    ['vLLM newest NIXL: the 30 s lease', 'vllm/nixl-newest/prefill-response.chat.json', 30_000],
    ['vLLM newest NIXL, EOS (params kept)', 'vllm/nixl-newest/prefill-response.eos.json', 30_000],
    ['vllm-ascend Mooncake v0.18', 'vllm-ascend/mooncake-v0.18/prefill-response.chat.json', 480_000],
  ])('%s (%s) → completed, expires_at_ms = now + %i ms', async (_n, path, want) => {
    const body = fixtureBody(path);
    proxy = await startInProcessProxy({}, () => engineReply(200, body));
    const before = Date.now();
    const res = await proxy.call('POST', '/v1/chat/completions', prefillLeg('e2'));
    const after = Date.now();
    const result = res.json as { status: string; payload: unknown; expires_at_ms: number };
    expect(result.status).toBe('completed');
    expect(result.payload).toEqual(body.kv_transfer_params);
    expect(result.expires_at_ms).toBeGreaterThanOrEqual(before + want);
    expect(result.expires_at_ms).toBeLessThanOrEqual(after + want);
  });

  it('the engine request carries min_tokens 1 (the leg body has none)', async () => {
    proxy = await startInProcessProxy({}, () =>
      engineReply(200, fixtureBody('vllm/nixl-2026-01/prefill-response.chat.json')),
    );
    await proxy.call('POST', '/v1/chat/completions', prefillLeg('e3'));
    expect(JSON.parse(String(proxy.engine.requests[0]!.body))).toMatchObject({
      min_tokens: 1,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
    });
  });
});

describe('handoff decode proxy', () => {
  const result = (root: string, extra: Partial<PrefillResultInput>) =>
    buildPrefillResult({
      root_request_id: root,
      engine_request_id: `${root}#a1`,
      pair_id: `pair-${root}`,
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      payload: { remote_engine_id: 'p', remote_block_ids: [1] },
      ...extra,
    });
  const decodeLeg = (root: string, extra: Partial<PrefillResultInput>) => ({
    model: 'm',
    messages: MESSAGES,
    _motor_dispatch: envelope('decode', HANDOFF, { root, prefillUrl: PREFILL_PEER, decodeUrl: DECODE_PEER }),
    _motor_prefill_result: result(root, extra),
  });

  it.each<[string, Partial<PrefillResultInput>, boolean]>([
    ['completed, not expired: KV params verbatim', { expires_at_ms: Date.now() + 60_000 }, true],
    ['skipped: a plain decode', { status: 'skipped', payload: {} }, false],
    ['completed but expired: a plain decode', { expires_at_ms: Date.now() - 1 }, false],
  ])('%s', async (_n, extra, withKv) => {
    proxy = await startInProcessProxy({ role: 'decode' }, () =>
      engineReply(200, { id: 'c', object: 'chat.completion', choices: [] }),
    );
    const res = await proxy.call('POST', '/v1/chat/completions', decodeLeg('d1', extra));
    expect(res.status).toBe(200);
    const sent = JSON.parse(String(proxy.engine.requests[0]!.body)) as Record<string, unknown>;
    if (withKv) expect(sent.kv_transfer_params).toEqual({ remote_engine_id: 'p', remote_block_ids: [1] });
    else expect(sent).not.toHaveProperty('kv_transfer_params');
  });
});
