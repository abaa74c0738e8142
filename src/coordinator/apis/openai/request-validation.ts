import { isPlainObject } from '../../../common/http.js';
import { isClientForbiddenKey, VLLM_XARGS_KEY } from '../../../protocol/index.js';
import type { ApiKind, ClientRequest } from '../../internal-request/client-request.js';
import { MotorError } from '../../../common/motor-error.js';

export type { ApiKind, ClientRequest };

const invalid = (message: string, param: string | null = null): MotorError =>
  new MotorError('invalid_request', message, { param });

type Check = (v: unknown) => boolean;
const isInt: Check = (v) => typeof v === 'number' && Number.isInteger(v);
const isNum: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const isBool: Check = (v) => typeof v === 'boolean';
const isStr: Check = (v) => typeof v === 'string';
const isObj: Check = (v) => isPlainObject(v);
const isStop: Check = (v) =>
  typeof v === 'string' || (Array.isArray(v) && v.every((s) => typeof s === 'string'));

/** Types of the common sampling fields; `null` is accepted for each (OpenAI does). */
const FIELD_TYPES: Record<string, [Check, string]> = {
  stream: [isBool, 'a boolean'],
  max_tokens: [isInt, 'an integer'],
  max_completion_tokens: [isInt, 'an integer'],
  min_tokens: [isInt, 'an integer'],
  n: [isInt, 'an integer'],
  temperature: [isNum, 'a number'],
  top_p: [isNum, 'a number'],
  presence_penalty: [isNum, 'a number'],
  frequency_penalty: [isNum, 'a number'],
  seed: [isInt, 'an integer'],
  stop: [isStop, 'a string or an array of strings'],
  stream_options: [isObj, 'an object'],
  user: [isStr, 'a string'],
  return_token_ids: [isBool, 'a boolean'],
};

const FIELD_TYPE_LIST = Object.entries(FIELD_TYPES).map(
  ([key, [check, what]]) => [key, check, what] as const,
);

/**
 * Gateway validation of a parsed body: an object with `model` and `messages` (chat) or `prompt`
 * (completions), sane types for the common fields, and no internal keys. Engines validate the rest.
 */
export function validateClientRequest(kind: ApiKind, value: unknown): ClientRequest {
  if (!isPlainObject(value)) throw invalid('request body must be a JSON object');
  for (const key of Object.keys(value)) {
    if (isClientForbiddenKey(key))
      throw invalid(`'${key}' is an internal field and may not be sent by clients`, key);
  }
  const xargs = value[VLLM_XARGS_KEY];
  if (isPlainObject(xargs)) {
    for (const key of Object.keys(xargs)) {
      if (isClientForbiddenKey(key))
        throw invalid(
          `'${VLLM_XARGS_KEY}.${key}' is an internal field and may not be sent by clients`,
          VLLM_XARGS_KEY,
        );
    }
  }
  if (typeof value.model !== 'string' || value.model.length === 0) {
    throw invalid("'model' is required and must be a non-empty string", 'model');
  }
  if (kind === 'chat') {
    const messages = value.messages;
    if (!Array.isArray(messages) || messages.length === 0) {
      throw invalid("'messages' is required and must be a non-empty array", 'messages');
    }
    for (let i = 0; i < messages.length; i++) {
      const m: unknown = messages[i];
      if (!isPlainObject(m) || typeof m.role !== 'string') {
        throw invalid(`'messages[${i}]' must be an object with a string 'role'`, 'messages');
      }
    }
  } else {
    const p = value.prompt;
    const ok =
      (typeof p === 'string' && p.length > 0) ||
      (Array.isArray(p) &&
        p.length > 0 &&
        (p.every((x) => typeof x === 'string') || p.every(isInt) || p.every(Array.isArray)));
    if (!ok)
      throw invalid("'prompt' is required and must be a string, an array of strings or token ids", 'prompt');
  }
  for (const [key, check, what] of FIELD_TYPE_LIST) {
    const v = value[key];
    if (v !== undefined && v !== null && !check(v)) throw invalid(`'${key}' must be ${what}`, key);
  }
  for (const key of ['max_tokens', 'max_completion_tokens', 'n'] as const) {
    const v = value[key];
    if (typeof v === 'number' && v < 1) throw invalid(`'${key}' must be >= 1`, key);
  }
  const stream = value.stream === true;
  if (value.stream_options !== undefined && value.stream_options !== null && !stream) {
    throw invalid("'stream_options' is only allowed when 'stream' is true", 'stream_options');
  }
  return { kind, body: value, model: value.model, stream, wantsTokenIds: value.return_token_ids === true };
}
