/**
 * The one home of "what a client-facing response object must not carry": protocol-internal keys
 * (`_motor_*`, `kv_transfer_params`) and token ids the client did not ask for (`return_token_ids`).
 * Used by the engine proxy (`normalizeResponseObject`) and the coordinator (`rewriteResponseObject`),
 * each adding its own extra step (chat reshape; cached-token merge).
 *
 * The two sides grew this rule apart and issue 13 keeps behaviour unchanged, so the scope differs
 * in three edge cases no supported engine produces (client-fields.test.ts pins both):
 *
 *   scope          top level                                      each choice
 *   'proxy'        kv_transfer_params; token_ids, prompt_token_ids  kv_transfer_params; token ids
 *   'coordinator'  _motor_*, kv_transfer_params; prompt_token_ids   token ids
 *
 * (token ids only when the client did not ask for them.) In proxy mode the coordinator relays the
 * proxy's output, so a client sees the union either way.
 */

import { isPlainObject } from '../common/http.js';
import { isInternalResponseKey, KV_TRANSFER_PARAMS_KEY, MOTOR_KEY_PREFIX } from '../protocol/index.js';

export type ClientFieldScope = 'proxy' | 'coordinator';

const TOKEN_ID_KEYS = ['prompt_token_ids', 'token_ids'] as const;

function isDroppedTopLevelKey(key: string, scope: ClientFieldScope, stripTokenIds: boolean): boolean {
  if (scope === 'coordinator') {
    return isInternalResponseKey(key) || (stripTokenIds && key === 'prompt_token_ids');
  }
  return (
    key === KV_TRANSFER_PARAMS_KEY || (stripTokenIds && (key === 'prompt_token_ids' || key === 'token_ids'))
  );
}

/**
 * Drops, in place, what a client may not see from one response object (a non-stream body or one
 * SSE chunk), at the top level and in each choice. `stripTokenIds`: the client did not send
 * `return_token_ids: true`. Returns whether anything changed.
 */
export function stripClientForbiddenFields(
  obj: Record<string, unknown>,
  scope: ClientFieldScope,
  stripTokenIds: boolean,
): boolean {
  let changed = false;
  for (const key of Object.keys(obj)) {
    if (isDroppedTopLevelKey(key, scope, stripTokenIds)) {
      delete obj[key];
      changed = true;
    }
  }
  const kvInChoices = scope === 'proxy';
  if (!(stripTokenIds || kvInChoices) || !Array.isArray(obj.choices)) return changed;
  for (const choice of obj.choices as unknown[]) {
    if (!isPlainObject(choice)) continue;
    if (stripTokenIds) {
      for (const key of TOKEN_ID_KEYS) {
        if (key in choice) {
          delete choice[key];
          changed = true;
        }
      }
    }
    if (kvInChoices && KV_TRANSFER_PARAMS_KEY in choice) {
      delete choice[KV_TRANSFER_PARAMS_KEY];
      changed = true;
    }
  }
  return changed;
}

/*
 * The cheap pre-check's markers: quoted key openings found in any JSON text that carries a field
 * `stripClientForbiddenFields` may drop in that scope. A text without them needs no parse.
 */
const MOTOR_MARK = `"${MOTOR_KEY_PREFIX}`;
const KV_MARK = `"${KV_TRANSFER_PARAMS_KEY}"`;
const TOKEN_IDS_MARK = 'token_ids"';
const MOTOR_MARK_BYTES = Buffer.from(MOTOR_MARK);
const KV_MARK_BYTES = Buffer.from(KV_MARK);
const TOKEN_IDS_MARK_BYTES = Buffer.from(TOKEN_IDS_MARK);

/** The markers `mayCarryClientForbiddenFields` looks for, for a one-pass scan of several marker sets. */
export function clientForbiddenMarks(scope: ClientFieldScope, stripTokenIds: boolean): Buffer[] {
  const marks = [KV_MARK_BYTES];
  if (scope === 'coordinator') marks.push(MOTOR_MARK_BYTES);
  if (stripTokenIds) marks.push(TOKEN_IDS_MARK_BYTES);
  return marks;
}

/** Whether these bytes may hold a field a client must not get (false: relay them as they are). */
export function mayCarryClientForbiddenFields(
  buf: Buffer,
  scope: ClientFieldScope,
  stripTokenIds: boolean,
): boolean {
  return (
    (scope === 'coordinator' && buf.includes(MOTOR_MARK_BYTES)) ||
    buf.includes(KV_MARK_BYTES) ||
    (stripTokenIds && buf.includes(TOKEN_IDS_MARK_BYTES))
  );
}

/** `mayCarryClientForbiddenFields` for text already decoded (the engine proxy's SSE events). */
export function textMayCarryClientForbiddenFields(
  text: string,
  scope: ClientFieldScope,
  stripTokenIds: boolean,
): boolean {
  return (
    (scope === 'coordinator' && text.includes(MOTOR_MARK)) ||
    text.includes(KV_MARK) ||
    (stripTokenIds && text.includes(TOKEN_IDS_MARK))
  );
}
