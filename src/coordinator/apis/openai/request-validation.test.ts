import { describe, expect, it } from 'vitest';
import { MotorError } from '../../../common/motor-error.js';
import { validateClientRequest, type ApiKind } from './request-validation.js';

const msgs = [{ role: 'user', content: 'hi' }];

describe('validateClientRequest', () => {
  it.each<[ApiKind, unknown, string | null]>([
    ['chat', { model: 'm', messages: msgs }, null],
    ['completion', { model: 'm', prompt: 'hi' }, null],
    ['completion', { model: 'm', prompt: [1, 2, 3] }, null],
    ['chat', [], 'request body must be a JSON object'],
    ['chat', { messages: msgs }, "'model' is required"],
    ['chat', { model: 'm' }, "'messages' is required"],
    ['chat', { model: 'm', messages: [] }, "'messages' is required"],
    ['chat', { model: 'm', messages: ['x'] }, "'messages[0]' must be an object"],
    ['completion', { model: 'm' }, "'prompt' is required"],
    ['chat', { model: 'm', messages: msgs, stream: 'yes' }, "'stream' must be a boolean"],
    ['chat', { model: 'm', messages: msgs, max_tokens: 1.5 }, "'max_tokens' must be an integer"],
    ['chat', { model: 'm', messages: msgs, max_tokens: 0 }, "'max_tokens' must be >= 1"],
    ['chat', { model: 'm', messages: msgs, temperature: 'hot' }, "'temperature' must be a number"],
    [
      'chat',
      { model: 'm', messages: msgs, stream_options: { include_usage: true } },
      "'stream_options' is only allowed",
    ],
    ['chat', { model: 'm', messages: msgs, _motor_dispatch: {} }, "'_motor_dispatch' is an internal field"],
    [
      'chat',
      { model: 'm', messages: msgs, _motor_prefill_result: {} },
      "'_motor_prefill_result' is an internal field",
    ],
    [
      'chat',
      { model: 'm', messages: msgs, kv_transfer_params: {} },
      "'kv_transfer_params' is an internal field",
    ],
    ['completion', { model: 'm', prompt: 'x', bootstrap_room: 1 }, "'bootstrap_room' is an internal field"],
    ['completion', { model: 'm', prompt: 'x', bootstrap_host: 'h' }, "'bootstrap_host' is an internal field"],
    // vLLM's extra_args start from vllm_xargs: a KV or Motor key inside it steers like one at the top
    [
      'chat',
      { model: 'm', messages: msgs, vllm_xargs: { kv_transfer_params: { do_remote_prefill: true } } },
      "'vllm_xargs.kv_transfer_params' is an internal field",
    ],
    [
      'completion',
      { model: 'm', prompt: 'x', vllm_xargs: { _motor_dispatch: {} } },
      "'vllm_xargs._motor_dispatch' is an internal field",
    ],
    [
      'completion',
      { model: 'm', prompt: 'x', vllm_xargs: { bootstrap_room: 1 } },
      "'vllm_xargs.bootstrap_room' is an internal field",
    ],
    ['chat', { model: 'm', messages: msgs, vllm_xargs: { my_plugin_arg: 1 } }, null],
  ])('%s %j → %s', (kind, body, error) => {
    let message: string | null = null;
    try {
      validateClientRequest(kind, body);
    } catch (err) {
      expect(err).toBeInstanceOf(MotorError);
      expect((err as MotorError).status).toBe(400);
      message = (err as Error).message;
    }
    if (error === null) expect(message).toBeNull();
    else expect(message).toContain(error);
  });
});
