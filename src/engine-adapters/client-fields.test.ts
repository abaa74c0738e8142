import { describe, expect, it } from 'vitest';
import {
  mayCarryClientForbiddenFields,
  stripClientForbiddenFields,
  textMayCarryClientForbiddenFields,
  type ClientFieldScope,
} from './client-fields.js';

type Obj = Record<string, unknown>;

// Each row: the input, whether token ids go, and the object each scope leaves — the engine proxy's
// old `normalizeResponseObject` (minus the chat reshape) and the coordinator's old
// `rewriteResponseObject` (minus the cached-token merge). `null`: left unchanged.
const rows: [string, Obj, boolean, Obj | null, Obj | null][] = [
  ['nothing to drop', { id: 'x', choices: [{ text: 'a' }] }, true, null, null],
  ['top-level kv_transfer_params', { id: 'x', kv_transfer_params: null }, false, { id: 'x' }, { id: 'x' }],
  // The three edge cases where the sides differ (no supported engine sends these shapes).
  ['top-level _motor_* key: coordinator only', { id: 'x', _motor_x: 1 }, true, null, { id: 'x' }],
  ['top-level token_ids: proxy only', { id: 'x', token_ids: [1] }, true, { id: 'x' }, null],
  [
    'kv_transfer_params in a choice: proxy only',
    { choices: [{ index: 0, kv_transfer_params: {} }] },
    false,
    { choices: [{ index: 0 }] },
    null,
  ],
  [
    'token ids at top level and in choices',
    { prompt_token_ids: [1], choices: [{ token_ids: [2], prompt_token_ids: [3], text: 'a' }] },
    true,
    { choices: [{ text: 'a' }] },
    { choices: [{ text: 'a' }] },
  ],
  [
    'token ids kept when the client asked',
    { prompt_token_ids: [1], token_ids: [0], choices: [{ token_ids: [2] }] },
    false,
    null,
    null,
  ],
  [
    'internal keys go even when token ids stay',
    { kv_transfer_params: 1, _motor_y: 2, prompt_token_ids: [1], choices: [{ token_ids: [2] }] },
    false,
    { _motor_y: 2, prompt_token_ids: [1], choices: [{ token_ids: [2] }] },
    { prompt_token_ids: [1], choices: [{ token_ids: [2] }] },
  ],
  [
    'non-object choices are skipped',
    { choices: [null, 3, [{ token_ids: [1] }], { token_ids: [1] }] },
    true,
    { choices: [null, 3, [{ token_ids: [1] }], {}] },
    { choices: [null, 3, [{ token_ids: [1] }], {}] },
  ],
  ['nested _motor_* keys stay', { usage: { _motor_z: 1 } }, true, null, null],
];

describe('stripClientForbiddenFields', () => {
  const cases = rows.flatMap(([name, input, strip, proxy, coordinator]) => [
    [`${name} (proxy)`, 'proxy' as ClientFieldScope, input, strip, proxy] as const,
    [`${name} (coordinator)`, 'coordinator' as ClientFieldScope, input, strip, coordinator] as const,
  ]);
  it.each(cases)('%s', (_name, scope, input, strip, expected) => {
    const obj = structuredClone(input);
    const changed = stripClientForbiddenFields(obj, scope, strip);
    expect(obj).toEqual(expected ?? input);
    expect(changed).toBe(expected !== null);
    if (changed) {
      // The cheap pre-check never misses an object the rule changes.
      const text = JSON.stringify(input);
      expect(mayCarryClientForbiddenFields(Buffer.from(text), scope, strip)).toBe(true);
      expect(textMayCarryClientForbiddenFields(text, scope, strip)).toBe(true);
    }
  });
});

describe('mayCarryClientForbiddenFields', () => {
  it.each<[string, string, ClientFieldScope, boolean, boolean]>([
    ['plain chunk', '{"choices":[{"delta":{"content":"a"}}]}', 'coordinator', true, false],
    ['kv key', '{"kv_transfer_params":null}', 'proxy', false, true],
    ['motor key, coordinator', '{"_motor_x":1}', 'coordinator', false, true],
    ['motor key, proxy (not dropped there)', '{"_motor_x":1}', 'proxy', false, false],
    ['token ids stripped', '{"choices":[{"token_ids":[1]}]}', 'proxy', true, true],
    ['token ids kept', '{"choices":[{"token_ids":[1]}]}', 'coordinator', false, false],
  ])('%s', (_name, text, scope, strip, expected) => {
    expect(mayCarryClientForbiddenFields(Buffer.from(text), scope, strip)).toBe(expected);
    expect(textMayCarryClientForbiddenFields(text, scope, strip)).toBe(expected);
  });
});
