import { expect } from 'vitest';

/**
 * Checks of a whole client-API stream as a client reads it, for the end-to-end tests: the event grammar
 * the SDKs assume, and the text the stream adds up to.
 */

interface SseEvent {
  readonly name: string;
  readonly data: Record<string, unknown>;
}

/** `event:` + `data:` frames (both Anthropic's and OpenAI Responses' framing). */
export function namedEvents(text: string): SseEvent[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((frame) => {
      const lines = frame.split('\n');
      const name = lines.find((l) => l.startsWith('event: '))?.slice('event: '.length) ?? '';
      const data = lines.find((l) => l.startsWith('data: '))?.slice('data: '.length) ?? 'null';
      return { name, data: JSON.parse(data) as Record<string, unknown> };
    });
}

/**
 * A Messages stream (`RawMessageStreamEvent`, `@anthropic-ai/sdk` 1.17 resources/messages/messages.d.ts):
 * one `message_start` first, blocks opened in index order 0,1,2…, each delta for the open block, each
 * block stopped once, then one `message_delta` and `message_stop` last. Returns the text blocks' text.
 */
export function checkMessagesStream(text: string): { text: string; stopReason: unknown; events: string[] } {
  const events = namedEvents(text);
  const names = events.map((e) => e.name);
  for (const e of events) expect(e.data.type).toBe(e.name);
  expect(names[0]).toBe('message_start');
  expect(names.filter((n) => n === 'message_start')).toHaveLength(1);
  expect(names.slice(-2)).toEqual(['message_delta', 'message_stop']);
  expect(names).not.toContain('error');
  let open: number | null = null;
  let next = 0;
  let out = '';
  for (const e of events) {
    const index = e.data.index as number;
    if (e.name === 'content_block_start') {
      expect(open).toBeNull();
      expect(index).toBe(next++);
      open = index;
    } else if (e.name === 'content_block_delta') {
      expect(index).toBe(open);
      const d = e.data.delta as { type: string; text?: string };
      if (d.type === 'text_delta') out += d.text;
    } else if (e.name === 'content_block_stop') {
      expect(index).toBe(open);
      open = null;
    }
  }
  expect(open).toBeNull();
  const stopReason = (events.at(-2)!.data.delta as { stop_reason: unknown }).stop_reason;
  return { text: out, stopReason, events: names };
}

/**
 * A Responses stream (`ResponseStreamEvent`, `openai` 6.49 resources/responses/responses.d.ts):
 * `sequence_number` 0,1,2… without gaps or repeats, `response.created` once and first, one terminal
 * event last, and each `output_text.done` equal to its deltas. Returns the deltas' text and the final
 * response.
 */
export function checkResponsesStream(text: string): { text: string; final: Record<string, unknown> } {
  const events = namedEvents(text);
  expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
  for (const e of events) expect(e.data.type).toBe(e.name);
  const names = events.map((e) => e.name);
  expect(names[0]).toBe('response.created');
  expect(names.filter((n) => n === 'response.created')).toHaveLength(1);
  const terminal = ['response.completed', 'response.incomplete', 'response.failed'];
  expect(names.filter((n) => terminal.includes(n))).toHaveLength(1);
  expect(terminal).toContain(names.at(-1));
  const byItem = new Map<string, string>();
  let out = '';
  for (const e of events) {
    if (e.name === 'response.output_text.delta') {
      const id = e.data.item_id as string;
      byItem.set(id, (byItem.get(id) ?? '') + (e.data.delta as string));
      out += e.data.delta as string;
    } else if (e.name === 'response.output_text.done') {
      expect(e.data.text).toBe(byItem.get(e.data.item_id as string));
    }
  }
  return { text: out, final: events.at(-1)!.data.response as Record<string, unknown> };
}
