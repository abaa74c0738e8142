/**
 * The one home of Motor's protocol-internal field names: the engine-native fields that steer KV
 * transfer, and Motor's own envelope keys. A client may never send them (the gateway refuses them),
 * an engine's answer never reaches a client with them, and only an envelope (proxy mode) or the
 * coordinator's direct mode puts them on an engine request.
 */

/** Every Motor envelope key starts with this: `_motor_dispatch`, `_motor_prefill_result`, and any later one. */
export const MOTOR_KEY_PREFIX = '_motor_';

/** vLLM's KV-connector field: steering on requests, the prefill's block handle on responses. */
export const KV_TRANSFER_PARAMS_KEY = 'kv_transfer_params';

/** SGLang's disaggregation rendezvous: the prefill engine's bootstrap server and the attempt's room. */
export const SGLANG_BOOTSTRAP_FIELDS = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room'] as const;

/** The gateway refuses any client key with this prefix (SGLang's fields and any future `bootstrap_*`). */
export const BOOTSTRAP_KEY_PREFIX = 'bootstrap_';

/** Engine-native fields that steer KV transfer in any supported engine; never next to an envelope. */
export const KV_STEERING_FIELDS = [KV_TRANSFER_PARAMS_KEY, ...SGLANG_BOOTSTRAP_FIELDS] as const;

/** A Motor envelope key (`_motor_*`). */
export function isMotorKey(key: string): boolean {
  return key.startsWith(MOTOR_KEY_PREFIX);
}

/** A request body key a client may never send: it would steer engines (conformance 33). */
export function isClientForbiddenKey(key: string): boolean {
  return isMotorKey(key) || key === KV_TRANSFER_PARAMS_KEY || key.startsWith(BOOTSTRAP_KEY_PREFIX);
}

/**
 * vLLM's free-form request extras: its OpenAI server starts `SamplingParams.extra_args` from this
 * object and only then sets `kv_transfer_params` from the top-level field when that is present
 * (vllm-project/vllm main, `ChatCompletionRequest.to_sampling_params`,
 * vllm/entrypoints/openai/chat_completion/protocol.py), and KV connectors read
 * `extra_args["kv_transfer_params"]`: a key inside it steers the engine like the same key at the top.
 */
export const VLLM_XARGS_KEY = 'vllm_xargs';

/** A response key stripped before a client sees the answer: Motor keys and the engine's KV handle. */
export function isInternalResponseKey(key: string): boolean {
  return isMotorKey(key) || key === KV_TRANSFER_PARAMS_KEY;
}
