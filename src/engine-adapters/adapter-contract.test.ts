import { describe, expect, it } from 'vitest';
import { stringifyWithBigInt } from '../common/json-bigint.js';
import {
  bootstrapRoomFor,
  buildMotorDispatch,
  buildPrefillResult,
  type DispatchRole,
  type MotorDispatch,
} from '../protocol/index.js';
import {
  ENGINE_ADAPTERS,
  engineAdapterFor,
  type EngineAdapter,
  type LegKind,
  type MetaserverKvFields,
} from './index.js';
import { bootstrapRoomSpan } from './sglang.js';

function dispatch(role: DispatchRole, mode = 'prefill_handoff_decode', over: Partial<MotorDispatch> = {}) {
  return buildMotorDispatch({
    root_request_id: 'req-1',
    engine_request_id: 'req-1#a1',
    pair_id: 'pair-1',
    attempt_seq: 1,
    role,
    dispatch_mode: mode,
    endpoints: {
      prefill: { instance_id: 1, endpoint_id: 0, url: 'http://10.0.0.1:9000' },
      decode: { instance_id: 2, endpoint_id: 0, url: 'http://10.0.0.2:9000/' },
    },
    ...over,
  });
}

const clientBody = () => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 8,
  _motor_dispatch: { anything: true },
  _motor_prefill_result: { anything: true },
});

const kvFields: MetaserverKvFields = {
  request_id: 'req-1#a1',
  do_remote_decode: true,
  remote_block_ids: [1, 2],
  remote_block_size: 16,
  remote_engine_id: 'eng-d',
  remote_host: '10.0.0.2',
  remote_port: 7000,
  remote_cached_tokens: 0,
};

/** Everything a leg may need; each adapter takes what its leg uses. */
function fullInput(d: MotorDispatch) {
  return {
    body: clientBody(),
    dispatch: d,
    prefillResult: buildPrefillResult({
      root_request_id: 'req-1',
      engine_request_id: 'req-1#a1',
      pair_id: 'pair-1',
      attempt_seq: 1,
      status: 'completed',
      handoff_mode: 'handoff',
      payload: { remote_block_ids: [3], opaque: { nested: 1 } },
    }),
    triggerKv: kvFields,
    bootstrap: { host: '10.0.0.1', port: 8998 },
  };
}

const MODES = ['prefill_handoff_decode', 'concurrent_engine_sync'] as const;
const ROLES: DispatchRole[] = ['single', 'prefill', 'decode'];

describe.each(ENGINE_ADAPTERS.map((a) => [a.kind, a] as [string, EngineAdapter]))(
  'adapter contract: %s',
  (_kind, adapter) => {
    it('is the registered adapter for its kind', () => {
      expect(engineAdapterFor(adapter.kind)).toBe(adapter);
      expect(adapter.reservedFields).toContain('kv_transfer_params');
    });

    it.each(ROLES.flatMap((role) => MODES.map((mode) => [role, mode] as const)))(
      'role %s / %s: strips _motor_*, sets the engine request id in body and header, keeps client fields',
      (role, mode) => {
        const d = dispatch(role, mode);
        const leg = adapter.legFor(d);
        if (!leg.ok) {
          // Only handoff is allowed to be unsupported (SGLang), and it names the field.
          expect(mode).toBe('prefill_handoff_decode');
          expect(leg.status).toBe(400);
          expect(leg.param).toBe('_motor_dispatch.dispatch_mode');
          return;
        }
        if (role === 'single') expect(leg.leg).toBe('single');
        const input = fullInput(d);
        const before = JSON.stringify(input.body);
        const req = adapter.buildEngineRequest(leg.leg, input);
        expect(req.ok).toBe(true);
        if (!req.ok) return;
        expect(JSON.stringify(input.body)).toBe(before); // input not mutated
        expect(Object.keys(req.body).filter((k) => k.startsWith('_motor_'))).toEqual([]);
        expect(req.body[adapter.requestIdField]).toBe('req-1#a1');
        expect(req.headers['x-request-id']).toBe('req-1#a1');
        expect(req.body.model).toBe('m');
        // The trigger prefill samples one token, as vllm-ascend's layer-wise proxy asks (vllm.ts).
        expect(req.body.max_tokens).toBe(leg.leg === 'trigger_prefill' ? 1 : 8);
        expect(() => stringifyWithBigInt(req.body)).not.toThrow();
      },
    );

    it('single leg carries no KV or bootstrap fields even if the client sent them', () => {
      const d = dispatch('single');
      const body = { ...clientBody(), kv_transfer_params: { x: 1 }, bootstrap_room: 5 };
      const req = adapter.buildEngineRequest('single', { body, dispatch: d });
      expect(req.ok).toBe(true);
      if (!req.ok) return;
      for (const key of adapter.reservedFields) expect(req.body).not.toHaveProperty(key);
    });

    it('rejects an unknown dispatch_mode naming the field', () => {
      const r = adapter.legFor({ role: 'prefill', dispatch_mode: 'teleport' });
      expect(r).toMatchObject({ ok: false, status: 400, param: '_motor_dispatch.dispatch_mode' });
    });

    it('concurrent_engine_sync maps onto the engine flavour for both sides', () => {
      const flavour = adapter.kind === 'vllm' ? 'trigger' : 'bootstrap';
      expect(adapter.legFor({ role: 'prefill', dispatch_mode: 'concurrent_engine_sync' })).toEqual({
        ok: true,
        leg: `${flavour}_prefill`,
      });
      expect(adapter.legFor({ role: 'decode', dispatch_mode: 'concurrent_engine_sync' })).toEqual({
        ok: true,
        leg: `${flavour}_decode`,
      });
    });

    it('refuses legs of the other engine', () => {
      const foreign: LegKind = adapter.kind === 'vllm' ? 'bootstrap_decode' : 'handoff_decode';
      const r = adapter.buildEngineRequest(foreign, fullInput(dispatch('decode')));
      expect(r.ok).toBe(false);
    });

    it('prefill response parsing refuses non-prefill legs and keeps usage', () => {
      expect(adapter.parsePrefillResponse('single', {}).ok).toBe(false);
      const leg = adapter.kind === 'vllm' ? 'handoff_prefill' : 'bootstrap_prefill';
      const usage = { prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 2 } };
      const r = adapter.parsePrefillResponse(leg, { kv_transfer_params: { a: 1 }, usage });
      expect(r).toMatchObject({ ok: true, usage });
    });

    it('abort closes the upstream connection', () => {
      const plan = adapter.abortPlan('req-1#a1');
      expect(plan.closeConnection).toBe(true);
      if (adapter.kind === 'sglang') {
        expect(plan.request).toEqual({ method: 'POST', path: '/abort_request', body: { rid: 'req-1#a1' } });
      } else {
        expect(plan.request).toBeNull();
      }
    });
  },
);

describe('vLLM translation (docs/engines.md)', () => {
  const vllm = engineAdapterFor('vllm');

  it.each<[LegKind, DispatchRole, string, Record<string, unknown>]>([
    [
      'handoff_prefill',
      'prefill',
      'prefill_handoff_decode',
      { do_remote_decode: true, do_remote_prefill: false },
    ],
    ['handoff_decode', 'decode', 'prefill_handoff_decode', { remote_block_ids: [3], opaque: { nested: 1 } }],
    [
      'trigger_decode',
      'decode',
      'concurrent_engine_sync',
      { do_remote_decode: false, do_remote_prefill: true, metaserver: 'http://10.0.0.1:9000/v1/metaserver' },
    ],
    ['trigger_prefill', 'prefill', 'concurrent_engine_sync', { ...kvFields, do_remote_prefill: false }],
  ])('%s → kv_transfer_params', (leg, role, mode, expected) => {
    const r = vllm.buildEngineRequest(leg, fullInput(dispatch(role, mode)));
    expect(r.ok && r.body.kv_transfer_params).toEqual(expected);
  });

  it('handoff decode passes the payload object verbatim', () => {
    const input = fullInput(dispatch('decode'));
    const r = vllm.buildEngineRequest('handoff_decode', input);
    expect(r.ok && r.body.kv_transfer_params).toBe(input.prefillResult.payload);
  });

  it.each([
    ['missing', null, '_motor_prefill_result'],
    ['other pair', { pair_id: 'pair-2' }, '_motor_prefill_result'],
    ['other attempt', { attempt_seq: 2 }, '_motor_prefill_result'],
    ['prepared', { status: 'prepared' as const }, '_motor_prefill_result.status'],
    ['trigger mode', { handoff_mode: 'trigger' as const }, '_motor_prefill_result.status'],
  ])('handoff decode refuses a prefill result that is %s', (_name, over, param) => {
    const input = fullInput(dispatch('decode'));
    const prefillResult = over === null ? null : { ...input.prefillResult, ...over };
    const r = vllm.buildEngineRequest('handoff_decode', { ...input, prefillResult });
    expect(r).toMatchObject({ ok: false, status: 400, param });
  });

  it('trigger decode without a prefill endpoint is refused', () => {
    const d = dispatch('decode', 'concurrent_engine_sync', { endpoints: { prefill: null, decode: null } });
    expect(vllm.buildEngineRequest('trigger_decode', { body: clientBody(), dispatch: d })).toMatchObject({
      ok: false,
      param: '_motor_dispatch.endpoints.prefill',
    });
  });

  it('a handoff prefill answer without kv_transfer_params is skipped (vllm-handoff-prefill.test.ts)', () => {
    expect(vllm.parsePrefillResponse('handoff_prefill', { usage: {} })).toMatchObject({
      ok: true,
      skipped: true,
    });
  });
});

describe('SGLang translation (docs/engines.md)', () => {
  const sglang = engineAdapterFor('sglang');

  it('both legs get the same 63-bit room, the prefill host and port, written as an exact integer', () => {
    const p = sglang.buildEngineRequest(
      'bootstrap_prefill',
      fullInput(dispatch('prefill', 'concurrent_engine_sync')),
    );
    const d = sglang.buildEngineRequest(
      'bootstrap_decode',
      fullInput(dispatch('decode', 'concurrent_engine_sync')),
    );
    expect(p.ok && d.ok).toBe(true);
    if (!p.ok || !d.ok) return;
    const room = bootstrapRoomFor('pair-1', 1);
    expect(p.body.bootstrap_room).toBe(room);
    expect(d.body.bootstrap_room).toBe(room);
    expect(p.body).toMatchObject({ bootstrap_host: '10.0.0.1', bootstrap_port: 8998, rid: 'req-1#a1' });
    expect(stringifyWithBigInt(d.body)).toContain(`"bootstrap_room":${room.toString()}`);
  });

  it('a new attempt gets a new room', () => {
    const a1 = sglang.buildEngineRequest(
      'bootstrap_decode',
      fullInput(dispatch('decode', 'concurrent_engine_sync')),
    );
    const a2 = sglang.buildEngineRequest(
      'bootstrap_decode',
      fullInput(
        dispatch('decode', 'concurrent_engine_sync', { attempt_seq: 2, engine_request_id: 'req-1#a2' }),
      ),
    );
    expect(a1.ok && a2.ok && a1.body.bootstrap_room !== a2.body.bootstrap_room).toBe(true);
  });

  it.each([
    [{ prompt: 'one' }, 1],
    [{ prompt: ['a', 'b', 'c'] }, 3],
    [{ prompt: [[1, 2], [3]] }, 2],
    [{ prompt: [1, 2, 3] }, 1], // one prompt of token ids
    [{ messages: [], n: 4 }, 4],
    [{ text: ['a', 'b'], sampling_params: { n: 2 } }, 4],
    [{ input_ids: [[1], [2], [3]] }, 3],
  ])('a body %o occupies %i rooms (SGLang fans a scalar room out per prompt and sample)', (body, span) => {
    expect(bootstrapRoomSpan(body)).toBe(span);
  });

  it('a batch gets a room that still fits 63 bits after the fan-out, the same on both legs', () => {
    const batch = { ...clientBody(), prompt: ['a', 'b', 'c'] };
    const legs = (['bootstrap_prefill', 'bootstrap_decode'] as const).map((leg) =>
      sglang.buildEngineRequest(leg, {
        ...fullInput(dispatch(leg === 'bootstrap_prefill' ? 'prefill' : 'decode', 'concurrent_engine_sync')),
        body: batch,
      }),
    );
    const rooms = legs.map((r) => (r.ok ? r.body.bootstrap_room : null));
    expect(rooms[0]).toBe(bootstrapRoomFor('pair-1', 1, 3));
    expect(rooms[1]).toBe(rooms[0]);
  });

  it('a bootstrap leg without an address is refused', () => {
    const r = sglang.buildEngineRequest('bootstrap_decode', {
      body: clientBody(),
      dispatch: dispatch('decode', 'concurrent_engine_sync'),
    });
    expect(r).toMatchObject({ ok: false, status: 400 });
  });
});
// The metaserver body check: metaserver-fields.test.ts and metaserver.fixtures.test.ts.
