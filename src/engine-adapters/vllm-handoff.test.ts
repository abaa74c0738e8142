import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { buildMotorDispatch, buildPrefillResult, type PrefillResultInput } from '../protocol/index.js';
import {
  asSkippedHandoff,
  DEFAULT_HANDOFF_TTL_MS,
  handoffExpired,
  handoffTtlMs,
  NIXL_LEASE_TTL_MS,
  vllmAdapter as vllm,
} from './index.js';

/** The vLLM handoff prefill and decode against the engines' golden bodies (issue 14 item 2). */

const dispatch = (role: 'prefill' | 'decode') =>
  buildMotorDispatch({
    root_request_id: 'r',
    engine_request_id: 'r#a1',
    pair_id: 'p',
    attempt_seq: 1,
    role,
    dispatch_mode: 'prefill_handoff_decode',
    endpoints: { prefill: null, decode: null },
  });
const result = (over: Partial<PrefillResultInput> = {}) =>
  buildPrefillResult({
    root_request_id: 'r',
    engine_request_id: 'r#a1',
    pair_id: 'p',
    attempt_seq: 1,
    status: 'completed',
    handoff_mode: 'handoff',
    payload: { remote_engine_id: 'e' },
    ...over,
  });
const kvOf = (path: string) => fixtureBody(path).kv_transfer_params as Record<string, unknown>;

describe('vLLM handoff prefill request', () => {
  it('adds min_tokens 1 (over the client value) and the handoff KV params', () => {
    const r = vllm.buildEngineRequest('handoff_prefill', {
      body: { model: 'm', prompt: 'x', max_tokens: 1, min_tokens: 5 },
      dispatch: dispatch('prefill'),
    });
    expect(r).toMatchObject({
      ok: true,
      body: { min_tokens: 1, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } },
    });
  });

  it.each(['single', 'handoff_decode'] as const)('leaves min_tokens of a %s leg alone', (leg) => {
    const r = vllm.buildEngineRequest(leg, {
      body: { model: 'm', prompt: 'x', min_tokens: 5 },
      dispatch: dispatch('decode'),
      prefillResult: result(),
    });
    expect(r.ok && r.body.min_tokens).toBe(5);
  });
});

describe('vLLM handoff prefill answer', () => {
  it.each<[string, string, 'skipped' | 'completed']>([
    ['NIXL 2026-01, length-capped', 'vllm/nixl-2026-01/prefill-response.chat.json', 'completed'],
    ['NIXL 2026-01, EOS → null', 'vllm/nixl-2026-01/prefill-response.eos-null.json', 'skipped'],
    ['newest NIXL, EOS keeps params', 'vllm/nixl-newest/prefill-response.eos.json', 'completed'],
    ['NIXL push', 'vllm/nixl-push/prefill-response.chat.json', 'completed'],
    ['NIXL push, EOS keeps params', 'vllm/nixl-push/prefill-response.eos.json', 'completed'],
    [
      'vllm-ascend Mooncake v0.13, EOS → null',
      'vllm-ascend/mooncake-v0.13/prefill-response.eos-null.json',
      'skipped',
    ],
    ['vllm-ascend Mooncake main', 'vllm-ascend/mooncake-main/prefill-response.chat.json', 'completed'],
  ])('%s → %s', (_n, path, want) => {
    const body = fixtureBody(path);
    const r = vllm.parsePrefillResponse('handoff_prefill', body);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.skipped === true ? 'skipped' : 'completed').toBe(want);
    expect(r.payload).toEqual(want === 'skipped' ? {} : body.kv_transfer_params);
    expect(r.usage).toEqual(body.usage);
  });

  it.each([
    ['not an object', 'oops'],
    ['params not an object', { kv_transfer_params: [1] }],
  ])('%s → 502', (_n, body) => {
    expect(vllm.parsePrefillResponse('handoff_prefill', body)).toMatchObject({ ok: false, status: 502 });
  });
});

describe('vLLM handoff decode request', () => {
  it.each<[string, Partial<PrefillResultInput>, unknown]>([
    ['completed: payload verbatim', {}, { remote_engine_id: 'e' }],
    ['skipped: no kv_transfer_params (a plain decode)', { status: 'skipped', payload: {} }, undefined],
  ])('%s', (_n, over, kv) => {
    const r = vllm.buildEngineRequest('handoff_decode', {
      body: { model: 'm', prompt: 'x', kv_transfer_params: { smuggled: true } },
      dispatch: dispatch('decode'),
      prefillResult: result(over),
    });
    expect(r.ok).toBe(true);
    expect(r.ok && r.body.kv_transfer_params).toEqual(kv);
  });
});

describe('handoff TTL', () => {
  it.each([
    ['NIXL 2026-01', 'vllm/nixl-2026-01/prefill-response.chat.json', DEFAULT_HANDOFF_TTL_MS],
    ['newest NIXL (lease)', 'vllm/nixl-newest/prefill-response.chat.json', NIXL_LEASE_TTL_MS],
    ['NIXL push (same lease)', 'vllm/nixl-push/prefill-response.chat.json', NIXL_LEASE_TTL_MS],
    ['NIXL push, EOS-stopped', 'vllm/nixl-push/prefill-response.eos.json', NIXL_LEASE_TTL_MS],
    [
      'vllm-ascend Mooncake v0.18',
      'vllm-ascend/mooncake-v0.18/prefill-response.chat.json',
      DEFAULT_HANDOFF_TTL_MS,
    ],
    [
      'vllm-ascend Mooncake hybrid',
      'vllm-ascend/mooncake-hybrid-main/prefill-response.chat.json',
      DEFAULT_HANDOFF_TTL_MS,
    ],
  ])('%s (%s) → %i ms', (_n, path, want) => {
    expect(handoffTtlMs(kvOf(path), DEFAULT_HANDOFF_TTL_MS)).toBe(want);
  });

  it('a shorter configured TTL wins over the lease', () => {
    expect(handoffTtlMs({ transfer_mode: 'pull' }, 5_000)).toBe(5_000);
  });

  it.each<[string, Partial<PrefillResultInput>, boolean]>([
    ['no expiry', { expires_at_ms: null }, false],
    ['before expiry', { expires_at_ms: 1001 }, false],
    ['at expiry', { expires_at_ms: 1000 }, true],
    ['skipped never expires', { status: 'skipped', expires_at_ms: 1 }, false],
  ])('expired: %s', (_n, over, want) => {
    expect(handoffExpired(result(over), 1000)).toBe(want);
  });

  it('an expired result becomes a skipped one with no payload', () => {
    expect(asSkippedHandoff(result({ expires_at_ms: 5 }))).toMatchObject({
      status: 'skipped',
      payload: {},
      expires_at_ms: null,
      pair_id: 'p',
    });
  });
});
