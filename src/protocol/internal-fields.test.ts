import { describe, expect, it } from 'vitest';
import { MOTOR_DISPATCH_KEY, MOTOR_PREFILL_RESULT_KEY } from './constants.js';
import {
  isClientForbiddenKey,
  isInternalResponseKey,
  isMotorKey,
  KV_TRANSFER_PARAMS_KEY,
  KV_STEERING_FIELDS,
  SGLANG_BOOTSTRAP_FIELDS,
} from './internal-fields.js';

describe('internal field predicates', () => {
  // key, Motor key, forbidden from clients, stripped from responses
  it.each<[string, boolean, boolean, boolean]>([
    [MOTOR_DISPATCH_KEY, true, true, true],
    [MOTOR_PREFILL_RESULT_KEY, true, true, true],
    ['_motor_future', true, true, true],
    ['kv_transfer_params', false, true, true],
    ['bootstrap_host', false, true, false],
    ['bootstrap_port', false, true, false],
    ['bootstrap_room', false, true, false],
    ['bootstrap_anything', false, true, false],
    ['model', false, false, false],
    ['messages', false, false, false],
    ['motor_dispatch', false, false, false],
    ['_motor', false, false, false],
    ['kv_transfer_params_x', false, false, false],
    ['prompt_token_ids', false, false, false],
  ])('%s', (key, motor, forbidden, internalResponse) => {
    expect(isMotorKey(key)).toBe(motor);
    expect(isClientForbiddenKey(key)).toBe(forbidden);
    expect(isInternalResponseKey(key)).toBe(internalResponse);
  });
});

describe('internal field lists', () => {
  it('KV steering fields are vLLM’s kv_transfer_params then SGLang’s bootstrap fields', () => {
    expect(KV_STEERING_FIELDS).toEqual([
      'kv_transfer_params',
      'bootstrap_host',
      'bootstrap_port',
      'bootstrap_room',
    ]);
    expect(SGLANG_BOOTSTRAP_FIELDS).toEqual(['bootstrap_host', 'bootstrap_port', 'bootstrap_room']);
  });

  it('every list entry is refused from clients, every response entry stripped', () => {
    for (const key of KV_STEERING_FIELDS) expect(isClientForbiddenKey(key)).toBe(true);
    expect(isInternalResponseKey(KV_TRANSFER_PARAMS_KEY)).toBe(true);
  });
});
