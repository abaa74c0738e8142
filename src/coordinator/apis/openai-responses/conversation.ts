import { MotorError } from '../../../common/motor-error.js';
import type { ResponseStore, StoredResponse } from '../../../state/response-store/response-store.js';
import type { Item } from './request.js';

type Json = Record<string, unknown>;

/**
 * The items a `previous_response_id` stands for: every earlier turn's input and output, oldest first,
 * read from the store (only the caller's tenant's records exist for it). An unknown, expired, deleted
 * or foreign id is a 400 naming `previous_response_id` (as OpenAI answers), never a fresh start.
 */
export async function previousItems(
  store: ResponseStore,
  tenant: string,
  previousId: string,
  maxDepth: number,
): Promise<Item[]> {
  const turns: StoredResponse[] = [];
  let id: string | null = previousId;
  while (id !== null) {
    if (turns.length >= maxDepth)
      throw new MotorError(
        'invalid_request',
        `the conversation behind previous_response_id is longer than responses.maxChainDepth (${maxDepth}) responses`,
        { param: 'previous_response_id' },
      );
    const record: StoredResponse | null = await store.get(id, tenant);
    if (record === null)
      throw new MotorError(
        'invalid_request',
        turns.length === 0
          ? `Previous response with id '${id}' not found (unknown, expired, deleted or another API key's).`
          : `Previous response '${previousId}' continues '${id}', which is no longer stored (expired or deleted).`,
        { param: 'previous_response_id' },
      );
    turns.push(record);
    id = record.previousId;
  }
  const items: Item[] = [];
  for (let i = turns.length - 1; i >= 0; i--) {
    const t = turns[i]!;
    items.push(...t.input, ...((t.response.output as Json[] | undefined) ?? []));
  }
  return items;
}

/** The response an output item id belongs to: Motor makes item ids from their response's id. */
export function responseIdOfItem(itemId: string): string | null {
  const m = /^(?:msg|rs|fc)_([0-9a-f]{32})(?:_\d+)?$/.exec(itemId);
  return m ? `resp_${m[1]}` : null;
}

/**
 * Replaces `item_reference` input items (the AI SDK sends them for earlier assistant output when
 * `store` is on) by the stored items they name; an unknown reference is a 400 naming it.
 */
export async function resolveReferences(
  store: ResponseStore | null,
  tenant: string,
  input: readonly Item[],
): Promise<Item[]> {
  if (!input.some((i) => i.type === 'item_reference')) return [...input];
  const out: Item[] = [];
  const responses = new Map<string, StoredResponse | null>();
  for (let i = 0; i < input.length; i++) {
    const item = input[i]!;
    if (item.type !== 'item_reference') {
      out.push(item);
      continue;
    }
    const notFound = new MotorError('invalid_request', `Item with id '${String(item.id)}' not found.`, {
      param: `input[${i}].id`,
    });
    const respId = typeof item.id === 'string' ? responseIdOfItem(item.id) : null;
    if (respId === null || store === null) throw notFound;
    if (!responses.has(respId)) responses.set(respId, await store.get(respId, tenant));
    const found = ((responses.get(respId)?.response.output as Json[] | undefined) ?? []).find(
      (o) => o.id === item.id,
    );
    if (found === undefined) throw notFound;
    out.push(found);
  }
  return out;
}
