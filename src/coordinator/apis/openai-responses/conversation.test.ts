import { describe, expect, it } from 'vitest';
import { MotorError } from '../../../common/motor-error.js';
import { MemoryResponseStore } from '../../../state/response-store/memory-store.js';
import type { StoredResponse } from '../../../state/response-store/response-store.js';
import { previousItems, resolveReferences, responseIdOfItem } from './conversation.js';

/**
 * `previous_response_id` and `item_reference` against the store. OpenAI answers an unknown previous id
 * with a 400 naming `previous_response_id` (`ResponseCreateParamsBase.previous_response_id`, `openai`
 * 6.49 resources/responses/responses.d.ts); the AI SDK sends `item_reference` for earlier output when
 * `store` is on (@ai-sdk/openai 3.0 convert-to-openai-responses-input).
 */

const A = '0'.repeat(31) + 'a';
const B = '0'.repeat(31) + 'b';
const C = '0'.repeat(31) + 'c';

function turn(id: string, previousId: string | null, text: string, tenant = 't1'): StoredResponse {
  return {
    id: `resp_${id}`,
    tenant,
    previousId: previousId === null ? null : `resp_${previousId}`,
    input: [{ type: 'message', role: 'user', content: `q-${text}`, id: `msg_${id}_in0` }],
    response: {
      id: `resp_${id}`,
      output: [
        {
          id: `msg_${id}`,
          type: 'message',
          role: 'assistant',
          content: [{ type: 'output_text', text: `a-${text}` }],
        },
      ],
    },
  };
}

async function storeWith(...records: StoredResponse[]): Promise<MemoryResponseStore> {
  const s = new MemoryResponseStore({
    maxEntries: 100,
    maxBytes: 1 << 20,
    maxRecordBytes: 1 << 20,
    ttlSeconds: 60,
  });
  for (const r of records) await s.put(r);
  return s;
}

const paramOf = async (p: Promise<unknown>): Promise<string | null> => {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(MotorError);
    expect((e as MotorError).status).toBe(400);
    return (e as MotorError).param;
  }
  throw new Error('expected a refusal');
};

describe('previousItems', () => {
  it('replays every earlier turn oldest first: input then output', async () => {
    const store = await storeWith(turn(A, null, '1'), turn(B, A, '2'), turn(C, B, '3'));
    const items = await previousItems(store, 't1', `resp_${C}`, 10);
    expect(items.map((i) => i.content)).toEqual([
      'q-1',
      [{ type: 'output_text', text: 'a-1' }],
      'q-2',
      [{ type: 'output_text', text: 'a-2' }],
      'q-3',
      [{ type: 'output_text', text: 'a-3' }],
    ]);
  });

  it.each<[string, string, string, number, RegExp]>([
    ['an unknown id', 't1', `resp_${'f'.repeat(32)}`, 10, /not found/],
    ["another tenant's id (the same answer as unknown)", 't2', `resp_${B}`, 10, /not found/],
    ['a chain longer than maxChainDepth', 't1', `resp_${C}`, 2, /maxChainDepth \(2\)/],
  ])('%s → 400 on previous_response_id', async (_name, tenant, id, depth, message) => {
    const store = await storeWith(turn(A, null, '1'), turn(B, A, '2'), turn(C, B, '3'));
    await expect(previousItems(store, tenant, id, depth)).rejects.toThrow(message);
    expect(await paramOf(previousItems(store, tenant, id, depth))).toBe('previous_response_id');
  });

  it('a chain whose older turn was deleted is refused, not replayed in part', async () => {
    const store = await storeWith(turn(A, null, '1'), turn(B, A, '2'));
    await store.delete(`resp_${A}`, 't1');
    await expect(previousItems(store, 't1', `resp_${B}`, 10)).rejects.toThrow(/no longer stored/);
  });
});

describe('resolveReferences', () => {
  it('item_reference → the stored output item; other items pass', async () => {
    const store = await storeWith(turn(A, null, '1'));
    const out = await resolveReferences(store, 't1', [
      { type: 'item_reference', id: `msg_${A}` },
      { type: 'message', role: 'user', content: 'next' },
    ]);
    expect(out).toEqual([
      turn(A, null, '1').response.output![0 as never],
      { type: 'message', role: 'user', content: 'next' },
    ]);
  });

  it.each<[string, string, string]>([
    ['an id Motor never made', 'msg_other', 'input[0].id'],
    ['an item of an unknown response', `msg_${B}`, 'input[0].id'],
    ["another tenant's item", `msg_${A}`, 'input[0].id'],
  ])('%s → 400 naming the input item', async (name, id, param) => {
    const store = await storeWith(turn(A, null, '1', name.startsWith('another') ? 't2' : 't1'));
    expect(await paramOf(resolveReferences(store, 't1', [{ type: 'item_reference', id }]))).toBe(param);
  });

  it.each<[string, string | null]>([
    [`msg_${A}`, `resp_${A}`],
    [`fc_${A}_2`, `resp_${A}`],
    [`rs_${A}_0`, `resp_${A}`],
    ['msg_short', null],
  ])('responseIdOfItem(%s) = %s', (item, resp) => {
    expect(responseIdOfItem(item)).toBe(resp);
  });
});
