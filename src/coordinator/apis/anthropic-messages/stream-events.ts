import { reasoningOf, type ChatChunk, type ChatUsage } from '../chat-frames.js';
import { anthropicUsage, stopReasonOf, toolUseId, type StopInfo } from './message.js';

/**
 * Chat chunks → the Messages stream (`MessageStreamEvent`, `@anthropic-ai/sdk` 1.17
 * resources/messages/messages.d.ts; order as the SDK's MessageStream accumulates it):
 * `message_start`, `ping`, per block `content_block_start` / `content_block_delta`
 * (`thinking_delta`, `text_delta`, `input_json_delta`) / `content_block_stop`, then `message_delta`
 * (stop reason, usage) and `message_stop`. One instance per client request: it lives across attempts,
 * so a migrated stream continues the same blocks. Each chunk costs its own small events, nothing more.
 */
export class AnthropicStreamEncoder {
  private open: 'text' | 'thinking' | 'tool_use' | null = null;
  private nextIndex = 0;
  /** chat tool-call index → its content block index. */
  private readonly toolBlocks = new Map<number, number>();
  private openTool = -1;
  private finish: string | null = null;
  private stopReason: string | number | null = null;
  private usage: ChatUsage | null = null;

  constructor(
    private readonly messageId: string,
    private readonly model: string,
    private readonly stop: StopInfo,
  ) {}

  /** `message_start` and a `ping`: written when the stream is committed. */
  start(): string {
    const message = {
      id: this.messageId,
      type: 'message',
      role: 'assistant',
      model: this.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // the prompt's size arrives with the usage chunk at the end; message_delta carries it
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return event('message_start', { type: 'message_start', message }) + event('ping', { type: 'ping' });
  }

  /** The events one chat chunk becomes ('' when it carries nothing for the client). */
  chunk(c: ChatChunk): string {
    if (c.usage) this.usage = c.usage;
    const choice = c.choices?.[0];
    if (choice === undefined) return '';
    let out = '';
    const d = choice.delta;
    if (d) {
      const reasoning = reasoningOf(d);
      if (typeof reasoning === 'string' && reasoning !== '') {
        out += this.ensure('thinking', { type: 'thinking', thinking: '', signature: '' });
        out += this.delta({ type: 'thinking_delta', thinking: reasoning });
      }
      if (typeof d.content === 'string' && d.content !== '') {
        out += this.ensure('text', { type: 'text', text: '' });
        out += this.delta({ type: 'text_delta', text: d.content });
      }
      if (d.tool_calls) {
        for (const call of d.tool_calls) {
          const k = call.index ?? 0;
          let block = this.toolBlocks.get(k);
          if (block === undefined) {
            out += this.close();
            block = this.nextIndex++;
            this.toolBlocks.set(k, block);
            this.open = 'tool_use';
            this.openTool = k;
            const content_block = {
              type: 'tool_use',
              id: toolUseId(this.messageId, k),
              name: call.function?.name ?? '',
              input: {},
            };
            out += event('content_block_start', { type: 'content_block_start', index: block, content_block });
          }
          const args = call.function?.arguments;
          if (typeof args === 'string' && args !== '')
            out += event('content_block_delta', {
              type: 'content_block_delta',
              index: block,
              delta: { type: 'input_json_delta', partial_json: args },
            });
        }
      }
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.stopReason = choice.stop_reason ?? null;
    }
    return out;
  }

  /** The closing events (open block stop, `message_delta`, `message_stop`). */
  end(): string {
    const { stop_reason, stop_sequence } = stopReasonOf(this.finish, this.stopReason, this.stop);
    return (
      this.close() +
      event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason, stop_sequence },
        usage: anthropicUsage(this.usage),
      }) +
      event('message_stop', { type: 'message_stop' })
    );
  }

  private ensure(kind: 'text' | 'thinking', content_block: Record<string, unknown>): string {
    if (this.open === kind) return '';
    const closed = this.close();
    this.open = kind;
    return (
      closed +
      event('content_block_start', { type: 'content_block_start', index: this.nextIndex++, content_block })
    );
  }

  private delta(delta: Record<string, unknown>): string {
    return event('content_block_delta', { type: 'content_block_delta', index: this.nextIndex - 1, delta });
  }

  private close(): string {
    if (this.open === null) return '';
    const index = this.open === 'tool_use' ? this.toolBlocks.get(this.openTool)! : this.nextIndex - 1;
    this.open = null;
    return event('content_block_stop', { type: 'content_block_stop', index });
  }
}

/** One named SSE event, as Anthropic frames them (`event:` line, then `data:`). */
export function event(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}
