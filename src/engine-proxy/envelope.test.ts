import { describe, expect, it } from 'vitest';
import { engineAdapterFor } from '../engine-adapters/index.js';
import { buildPrefillResult, KV_STEERING_FIELDS } from '../protocol/index.js';
import { checkEnvelope } from './envelope.js';
import type { ProxyRole } from './options.js';
import { ProxyError } from './proxy-error.js';
import { envelope } from './testing/index.js';

const HANDOFF = 'prefill_handoff_decode';
const CONCURRENT = 'concurrent_engine_sync';
const BOTH = [HANDOFF, CONCURRENT];
const dispatch = (role: string, mode: string) =>
  envelope(role, mode, { root: 'r', prefillUrl: 'http://p:1' });
const prefillResult = buildPrefillResult({
  root_request_id: 'r',
  engine_request_id: 'r#a1',
  pair_id: 'pair-r',
  attempt_seq: 1,
  status: 'completed',
  handoff_mode: 'handoff',
  payload: { a: 1 },
  usage: null,
  expires_at_ms: null,
});

interface Case {
  name: string;
  role: ProxyRole;
  engine?: 'vllm' | 'sglang';
  capabilities?: string[];
  body: Record<string, unknown>;
  /** The leg, or the refusal as code / param / message. */
  want: { leg: string } | { code: string; param: string | null; message: string | RegExp };
}

const cases: Case[] = [
  {
    name: 'single on a union proxy',
    role: 'union',
    body: { _motor_dispatch: dispatch('single', HANDOFF) },
    want: { leg: 'single' },
  },
  {
    name: 'degraded single on a prefill proxy',
    role: 'prefill',
    capabilities: [],
    body: { _motor_dispatch: dispatch('single', CONCURRENT) },
    want: { leg: 'single' },
  },
  {
    name: 'handoff prefill',
    role: 'prefill',
    body: { _motor_dispatch: dispatch('prefill', HANDOFF) },
    want: { leg: 'handoff_prefill' },
  },
  {
    name: 'trigger prefill',
    role: 'prefill',
    body: { _motor_dispatch: dispatch('prefill', CONCURRENT) },
    want: { leg: 'trigger_prefill' },
  },
  {
    name: 'handoff decode with its prefill result',
    role: 'decode',
    body: { _motor_dispatch: dispatch('decode', HANDOFF), _motor_prefill_result: prefillResult },
    want: { leg: 'handoff_decode' },
  },
  {
    name: 'bootstrap decode',
    role: 'decode',
    engine: 'sglang',
    body: { _motor_dispatch: dispatch('decode', CONCURRENT) },
    want: { leg: 'bootstrap_decode' },
  },
  {
    name: 'malformed envelope',
    role: 'union',
    body: { _motor_dispatch: { role: 'single' } },
    want: {
      code: 'invalid_request',
      param: '_motor_dispatch.root_request_id',
      message: /^_motor_dispatch\.root_request_id: /,
    },
  },
  ...KV_STEERING_FIELDS.map((key): Case => ({
    name: `legacy field ${key}`,
    role: 'union',
    body: { _motor_dispatch: dispatch('single', HANDOFF), [key]: 1 },
    want: {
      code: 'invalid_request',
      param: key,
      message: `'${key}' must not be sent next to _motor_dispatch: the envelope alone steers KV transfer`,
    },
  })),
  {
    name: 'role not served',
    role: 'decode',
    body: { _motor_dispatch: dispatch('prefill', HANDOFF) },
    want: {
      code: 'role_mismatch',
      param: '_motor_dispatch.role',
      message:
        "_motor_dispatch.role: 'prefill' is not served here (this engine proxy has role decode and accepts decode or single)",
    },
  },
  {
    // fallback-decode-only: a plain request on a vLLM decode just runs (no kv_transfer_params).
    name: 'vLLM decode serves single',
    role: 'decode',
    body: { _motor_dispatch: dispatch('single', HANDOFF) },
    want: { leg: 'single' },
  },
  {
    name: 'SGLang decode refuses single (it always waits for a bootstrap peer)',
    role: 'decode',
    engine: 'sglang',
    body: { _motor_dispatch: dispatch('single', CONCURRENT) },
    want: {
      code: 'role_mismatch',
      param: '_motor_dispatch.role',
      message:
        "_motor_dispatch.role: 'single' is not served here (this engine proxy has role decode and accepts decode)",
    },
  },
  {
    name: 'dispatch mode not a capability',
    role: 'prefill',
    capabilities: [],
    body: { _motor_dispatch: dispatch('prefill', HANDOFF) },
    want: {
      code: 'missing_capability',
      param: '_motor_dispatch.dispatch_mode',
      message:
        "_motor_dispatch.dispatch_mode: 'prefill_handoff_decode' is not a capability of this engine (dispatch_capabilities: none)",
    },
  },
  {
    name: 'the engine cannot run the mode',
    role: 'prefill',
    engine: 'sglang',
    body: { _motor_dispatch: dispatch('prefill', HANDOFF) },
    want: {
      code: 'invalid_request',
      param: '_motor_dispatch.dispatch_mode',
      message: "SGLang engines cannot run dispatch_mode 'prefill_handoff_decode'",
    },
  },
  {
    name: 'malformed prefill result',
    role: 'decode',
    body: { _motor_dispatch: dispatch('decode', HANDOFF), _motor_prefill_result: { status: 'completed' } },
    want: {
      code: 'invalid_request',
      param: '_motor_prefill_result.root_request_id',
      message: /^_motor_prefill_result\.root_request_id: /,
    },
  },
];

describe('checkEnvelope', () => {
  it.each(cases)('$name', ({ role, engine, capabilities, body, want }) => {
    const got = checkEnvelope(
      { model: 'm', ...body },
      { role, engine: engine ?? 'vllm', dispatchCapabilities: capabilities ?? BOTH },
      engineAdapterFor(engine ?? 'vllm'),
    );
    if ('leg' in want) {
      expect(got).not.toBeInstanceOf(ProxyError);
      expect(got).toMatchObject({ leg: want.leg, body: { model: 'm' } });
      expect(Object.keys((got as { body: object }).body)).toEqual(['model']);
      return;
    }
    expect(got).toBeInstanceOf(ProxyError);
    const err = got as ProxyError;
    expect({ code: err.code, param: err.param, status: err.status }).toEqual({
      code: want.code,
      param: want.param,
      status: 400,
    });
    if (typeof want.message === 'string') expect(err.message).toBe(want.message);
    else expect(err.message).toMatch(want.message);
  });

  it('keeps the prefill result only for a handoff decode', () => {
    const got = checkEnvelope(
      { _motor_dispatch: dispatch('decode', HANDOFF), _motor_prefill_result: prefillResult },
      { role: 'decode', engine: 'vllm', dispatchCapabilities: BOTH },
      engineAdapterFor('vllm'),
    );
    expect(got).toMatchObject({ prefillResult: { payload: { a: 1 } } });
  });
});
