import { reasoningOf, type ChatChunk, type ChatUsage } from '../chat-frames.js';
import {
  functionCallItem,
  messageItem,
  outputText,
  reasoningItem,
  responseObject,
  responsesUsage,
  statusOf,
  type ResponseShell,
} from './response-object.js';

type Json = Record<string, unknown>;

interface OpenItem {
  readonly kind: 'reasoning' | 'message' | 'function_call';
  readonly outputIndex: number;
  readonly id: string;
  text: string;
  /** function_call only. */
  readonly callId?: string;
  readonly name?: string;
}

/**
 * Chat chunks → the Responses stream (`ResponseStreamEvent`, `openai` 6.49
 * resources/responses/responses.d.ts, in the order lib/responses/ResponseStream.ts accumulates):
 * `response.created`, `response.in_progress`, per output item `response.output_item.added`, its
 * content part / deltas / `.done` events, `response.output_item.done`, then `response.completed` (or
 * `.incomplete`, `.failed`). Every event has the next `sequence_number`. The text is kept as it passes
 * (the final events and the stored response carry it); per chunk only its own events are built.
 * One instance per client request, across attempts (a migrated stream continues the same items).
 */
export class ResponsesStreamEncoder {
  private seq = 0;
  private readonly items: OpenItem[] = [];
  private open: OpenItem | null = null;
  private readonly calls = new Map<number, OpenItem>();
  private finish: string | null = null;
  private usage: ChatUsage | null = null;
  /** The output items once the stream ended (done states), for the final response and the store. */
  private final: Json[] = [];

  constructor(private readonly shell: ResponseShell) {}

  start(): string {
    const response = responseObject(this.shell, 'in_progress', [], null);
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  chunk(c: ChatChunk): string {
    if (c.usage) this.usage = c.usage;
    const choice = c.choices?.[0];
    if (choice === undefined) return '';
    let out = '';
    const d = choice.delta;
    if (d) {
      const reasoning = reasoningOf(d);
      if (typeof reasoning === 'string' && reasoning !== '') {
        out += this.ensure('reasoning');
        const item = this.open!;
        item.text += reasoning;
        out += this.event('response.reasoning_text.delta', {
          item_id: item.id,
          output_index: item.outputIndex,
          content_index: 0,
          delta: reasoning,
        });
      }
      if (typeof d.content === 'string' && d.content !== '') {
        out += this.ensure('message');
        const item = this.open!;
        item.text += d.content;
        out += this.event('response.output_text.delta', {
          item_id: item.id,
          output_index: item.outputIndex,
          content_index: 0,
          delta: d.content,
          logprobs: [],
        });
      }
      for (const call of d.tool_calls ?? []) {
        const k = call.index ?? 0;
        let item = this.calls.get(k);
        if (item === undefined) {
          out += this.close();
          item = {
            kind: 'function_call',
            outputIndex: this.items.length,
            id: this.shell.ids.functionCall(k),
            callId: this.shell.ids.callId(k),
            name: call.function?.name ?? '',
            text: '',
          };
          this.items.push(item);
          this.calls.set(k, item);
          this.open = item;
          out += this.event('response.output_item.added', {
            output_index: item.outputIndex,
            item: functionCallItem(item.id, item.callId!, item.name!, '', 'in_progress'),
          });
        }
        const args = call.function?.arguments;
        if (typeof args === 'string' && args !== '') {
          item.text += args;
          out += this.event('response.function_call_arguments.delta', {
            item_id: item.id,
            output_index: item.outputIndex,
            delta: args,
          });
        }
      }
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return out;
  }

  /** Closes the open item; the final response (completed / incomplete) is `finalResponse()`. */
  finishItems(): string {
    return this.close();
  }

  /** The Response as it ended (after `finishItems`). */
  finalResponse(): Json {
    return responseObject(this.shell, statusOf(this.finish), this.final, responsesUsage(this.usage));
  }

  /** `response.completed` or `response.incomplete` with the final response. */
  completedEvent(response: Json): string {
    const name = response.status === 'incomplete' ? 'response.incomplete' : 'response.completed';
    return this.event(name, { response });
  }

  /** `response.failed`: the stream ends with the response so far and the error. */
  failedEvent(code: string, message: string): string {
    const closed = this.close();
    const response = responseObject(this.shell, 'failed', this.final, responsesUsage(this.usage), {
      code,
      message,
    });
    return closed + this.event('response.failed', { response });
  }

  private ensure(kind: 'reasoning' | 'message'): string {
    if (this.open?.kind === kind) return '';
    let out = this.close();
    const outputIndex = this.items.length;
    const id = kind === 'message' ? this.shell.ids.message() : this.shell.ids.reasoning(outputIndex);
    const item: OpenItem = { kind, outputIndex, id, text: '' };
    this.items.push(item);
    this.open = item;
    if (kind === 'message') {
      out += this.event('response.output_item.added', {
        output_index: outputIndex,
        item: messageItem(id, 'in_progress', []),
      });
      out += this.event('response.content_part.added', {
        item_id: id,
        output_index: outputIndex,
        content_index: 0,
        part: outputText(''),
      });
    } else {
      out += this.event('response.output_item.added', {
        output_index: outputIndex,
        item: reasoningItem(id, null),
      });
      out += this.event('response.content_part.added', {
        item_id: id,
        output_index: outputIndex,
        content_index: 0,
        part: { type: 'reasoning_text', text: '' },
      });
    }
    return out;
  }

  private close(): string {
    const item = this.open;
    if (item === null) return '';
    this.open = null;
    const at = { item_id: item.id, output_index: item.outputIndex };
    let out = '';
    let done: Json;
    if (item.kind === 'message') {
      out += this.event('response.output_text.done', {
        ...at,
        content_index: 0,
        text: item.text,
        logprobs: [],
      });
      out += this.event('response.content_part.done', {
        ...at,
        content_index: 0,
        part: outputText(item.text),
      });
      done = messageItem(item.id, 'completed', [outputText(item.text)]);
    } else if (item.kind === 'reasoning') {
      out += this.event('response.reasoning_text.done', { ...at, content_index: 0, text: item.text });
      out += this.event('response.content_part.done', {
        ...at,
        content_index: 0,
        part: { type: 'reasoning_text', text: item.text },
      });
      done = reasoningItem(item.id, item.text);
    } else {
      out += this.event('response.function_call_arguments.done', {
        ...at,
        name: item.name,
        arguments: item.text,
      });
      done = functionCallItem(item.id, item.callId!, item.name!, item.text, 'completed');
    }
    this.final.push(done);
    return out + this.event('response.output_item.done', { output_index: item.outputIndex, item: done });
  }

  private event(type: string, fields: Json): string {
    // the SDK reads the type from the data; the `event:` line is what OpenAI's own stream sends too
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...fields })}\n\n`;
  }
}
