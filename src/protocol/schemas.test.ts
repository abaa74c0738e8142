import { describe, expect, it } from 'vitest';
import { PROTOCOL_MODEL_NAMES, protocolJsonSchema } from './json-schema.js';
import {
  buildDispatchStopResponse,
  buildMotorDispatch,
  buildPrefillResult,
  describeIssue,
  parseDispatchStopRequest,
  parseDispatchStopResponse,
  parseMotorDispatch,
  parsePrefillResult,
} from './parse.js';
import { matchesDispatch, normalizedReason } from './schemas.js';
import { bootstrapRoomFor } from './bootstrap-room.js';

const dispatch = {
  root_request_id: 'req-1',
  engine_request_id: 'req-1#a1',
  pair_id: 'pair-1',
  attempt_seq: 1,
  role: 'prefill',
  dispatch_mode: 'prefill_handoff_decode',
  endpoints: { prefill: { instance_id: 0, endpoint_id: 0, url: 'http://127.0.0.1:1' }, decode: null },
};

describe('MotorDispatch validation (conformance 9)', () => {
  it.each<[string, Record<string, unknown>, string | null]>([
    ['valid', {}, null],
    ['schema 1.7 accepted', { schema_version: '1.7' }, null],
    ['schema "1" accepted', { schema_version: '1' }, null],
    [
      'schema 2.0 rejected, names version',
      { schema_version: '2.0' },
      '_motor_dispatch.schema_version: Unsupported motor dispatch schema major version: 2.0',
    ],
    ['schema empty rejected', { schema_version: '' }, '_motor_dispatch.schema_version'],
    ['attempt_seq 0', { attempt_seq: 0 }, '_motor_dispatch.attempt_seq'],
    ['attempt_seq fractional', { attempt_seq: 1.5 }, '_motor_dispatch.attempt_seq'],
    ['attempt_seq string', { attempt_seq: '1' }, '_motor_dispatch.attempt_seq'],
    ['empty root id', { root_request_id: '' }, '_motor_dispatch.root_request_id'],
    ['empty engine id', { engine_request_id: '' }, '_motor_dispatch.engine_request_id'],
    ['empty pair id', { pair_id: '' }, '_motor_dispatch.pair_id'],
    ['empty dispatch mode', { dispatch_mode: '' }, '_motor_dispatch.dispatch_mode'],
    ['any dispatch mode string', { dispatch_mode: 'future_plan' }, null],
    ['bad role', { role: 'union' }, '_motor_dispatch.role'],
    ['missing endpoints', { endpoints: undefined }, '_motor_dispatch.endpoints'],
    [
      'negative instance id',
      { endpoints: { prefill: { instance_id: -1, endpoint_id: 0, url: 'u' } } },
      '_motor_dispatch.endpoints.prefill.instance_id',
    ],
    [
      'negative endpoint id',
      { endpoints: { decode: { instance_id: 0, endpoint_id: -3, url: 'u' } } },
      '_motor_dispatch.endpoints.decode.endpoint_id',
    ],
    [
      'empty url',
      { endpoints: { decode: { instance_id: 0, endpoint_id: 0, url: '' } } },
      '_motor_dispatch.endpoints.decode.url',
    ],
    ['endpoints may be empty', { endpoints: {} }, null],
  ])('%s', (_name, patch, expectedError) => {
    const result = parseMotorDispatch({ ...dispatch, ...patch });
    if (expectedError === null) {
      expect(result.ok).toBe(true);
    } else {
      expect(result.ok).toBe(false);
      if (!result.ok) expect(describeIssue(result.error)).toContain(expectedError);
    }
  });

  it('fills defaults, drops unknown keys and keeps the seed key order', () => {
    const result = parseMotorDispatch({ ...dispatch, extra: 1, endpoints: {} });
    expect(result.ok && JSON.stringify(result.value)).toBe(
      '{"schema_version":"1.0","root_request_id":"req-1","engine_request_id":"req-1#a1","pair_id":"pair-1",' +
        '"attempt_seq":1,"role":"prefill","dispatch_mode":"prefill_handoff_decode","endpoints":{"prefill":null,"decode":null}}',
    );
  });

  it('builder throws with the field on invalid input', () => {
    expect(() => buildMotorDispatch({ ...dispatch, role: 'prefill', attempt_seq: 0 })).toThrow(/attempt_seq/);
  });

  it('is not a record', () => {
    const result = parseMotorDispatch('nope');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.path).toBe('_motor_dispatch');
  });
});

describe('PrefillResult (conformance 9, 11)', () => {
  const result = {
    root_request_id: 'req-1',
    engine_request_id: 'req-1#a1',
    pair_id: 'pair-1',
    attempt_seq: 1,
    status: 'completed',
    handoff_mode: 'handoff',
  };

  it('serialises exactly the seed keys with defaults', () => {
    expect(
      JSON.stringify(buildPrefillResult({ ...result, status: 'completed', handoff_mode: 'handoff' })),
    ).toBe(
      '{"object":"motor.prefill_result","schema_version":"1.0","root_request_id":"req-1","engine_request_id":"req-1#a1",' +
        '"pair_id":"pair-1","attempt_seq":1,"status":"completed","handoff_mode":"handoff","payload":{},"usage":null,"expires_at_ms":null}',
    );
  });

  it.each<[string, Record<string, unknown>, string | null]>([
    ['valid', {}, null],
    ['bad status', { status: 'done' }, '_motor_prefill_result.status'],
    ['bad mode', { handoff_mode: 'nixl' }, '_motor_prefill_result.handoff_mode'],
    ['payload must be an object', { payload: [1] }, '_motor_prefill_result.payload'],
    ['usage may be null', { usage: null }, null],
    ['negative expiry', { expires_at_ms: -1 }, '_motor_prefill_result.expires_at_ms'],
    ['schema 3', { schema_version: '3.0' }, 'Unsupported motor prefill result schema major version: 3.0'],
    ['attempt_seq 0', { attempt_seq: 0 }, '_motor_prefill_result.attempt_seq'],
  ])('%s', (_name, patch, expectedError) => {
    const parsed = parsePrefillResult({ ...result, ...patch });
    expect(parsed.ok).toBe(expectedError === null);
    if (!parsed.ok && expectedError) expect(describeIssue(parsed.error)).toContain(expectedError);
  });

  it.each([
    [{}, true],
    [{ root_request_id: 'other' }, false],
    [{ pair_id: 'other' }, false],
    [{ attempt_seq: 2 }, false],
    [{ engine_request_id: 'ignored#a9' }, true],
  ])('matchesDispatch with %o → %s', (patch, expected) => {
    const parsed = parsePrefillResult({ ...result, ...patch });
    const d = parseMotorDispatch(dispatch);
    expect(parsed.ok && d.ok && matchesDispatch(parsed.value, d.value)).toBe(expected);
  });
});

describe('DispatchStopRequest / Response (conformance 10)', () => {
  const stop = { root_request_id: 'req-1', attempt_seq: 1, pair_id: 'pair-1' };
  it.each([
    [undefined, 'other'],
    ['peer_failed', 'peer_failed'],
    ['client_disconnect', 'client_disconnect'],
    ['timeout', 'timeout'],
    ['recompute', 'recompute'],
    ['retry_repair', 'retry_repair'],
    ['meteor_strike', 'other'],
    ['PEER_FAILED', 'other'],
  ])('reason %s normalises to %s', (reason, expected) => {
    const parsed = parseDispatchStopRequest({ ...stop, reason });
    expect(parsed.ok && normalizedReason(parsed.value)).toBe(expected);
  });

  it.each<[Record<string, unknown>, string | null]>([
    [{}, null],
    [{ attempt_seq: 0 }, 'attempt_seq'],
    [{ pair_id: '' }, 'pair_id'],
    [{ root_request_id: '' }, 'root_request_id'],
    [{ sent_at_ms: -5 }, 'sent_at_ms'],
    [{ engine_request_id: null }, null],
    [{ reason: 5 }, 'reason'],
  ])('stop request %o', (patch, field) => {
    const parsed = parseDispatchStopRequest({ ...stop, ...patch });
    expect(parsed.ok).toBe(field === null);
    if (!parsed.ok) expect(parsed.error.path).toBe(field);
  });

  it('stop response keys and state enum', () => {
    expect(
      JSON.stringify(
        buildDispatchStopResponse({ root_request_id: 'r', attempt_seq: 1, accepted: true, state: 'stopped' }),
      ),
    ).toBe('{"root_request_id":"r","attempt_seq":1,"accepted":true,"state":"stopped","message":""}');
    expect(
      parseDispatchStopResponse({ root_request_id: 'r', attempt_seq: 1, accepted: false, state: 'gone' }).ok,
    ).toBe(false);
  });
});

describe('JSON Schema export', () => {
  it.each(PROTOCOL_MODEL_NAMES)('%s has a schema with properties', (name) => {
    const schema = protocolJsonSchema(name);
    expect(schema.type).toBe('object');
    expect(Object.keys(schema.properties as object).length).toBeGreaterThan(0);
  });

  it('MotorDispatch requires the ids and bounds attempt_seq', () => {
    const schema = protocolJsonSchema('MotorDispatch') as {
      required: string[];
      properties: Record<string, { minimum?: number }>;
    };
    expect(schema.required).toEqual(
      expect.arrayContaining(['root_request_id', 'engine_request_id', 'pair_id', 'attempt_seq', 'role']),
    );
    expect(schema.required).not.toContain('schema_version');
    expect(schema.properties.attempt_seq?.minimum).toBe(1);
  });
});

describe('bootstrapRoomFor', () => {
  it('is deterministic, 63-bit, and differs per attempt', () => {
    const a = bootstrapRoomFor('pair-1', 1);
    expect(bootstrapRoomFor('pair-1', 1)).toBe(a);
    expect(bootstrapRoomFor('pair-1', 2)).not.toBe(a);
    expect(a >= 0n && a < 1n << 63n).toBe(true);
  });
});
