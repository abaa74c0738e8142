import { reasoningOf, type ChatChunk, type ChatUsage } from '../chat-frames.js';

type Json = Record<string, unknown>;

/** The ids of one response, all made from the root request id: the same on every attempt and replica. */
export class ResponseIds {
  readonly response: string;
  private readonly base: string;

  constructor(rootRequestId: string) {
    this.base = rootRequestId.replace(/^req-/, '').replace(/-/g, '');
    this.response = `resp_${this.base}`;
  }

  message = (): string => `msg_${this.base}`;
  reasoning = (outputIndex: number): string => `rs_${this.base}_${outputIndex}`;
  functionCall = (k: number): string => `fc_${this.base}_${k}`;
  callId = (k: number): string => `call_${this.base}_${k}`;
}

/** What the Response object repeats from its request (request.ts `echo`) plus its model and time. */
export interface ResponseShell {
  readonly ids: ResponseIds;
  readonly model: string;
  readonly createdAt: number;
  readonly echo: Json;
}

/**
 * Chat usage → Responses `ResponseUsage` (`openai` 6.49 resources/responses/responses.d.ts): cached
 * prompt tokens under `input_tokens_details`, reasoning tokens under `output_tokens_details`.
 */
export function responsesUsage(u: ChatUsage | null | undefined): Json | null {
  if (!u) return null;
  const input = u.prompt_tokens ?? 0;
  const output = u.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u.total_tokens ?? input + output,
  };
}

/**
 * The Response object (`Response` in the SDK's responses.d.ts). `status` from the chat finish reason:
 * `length` is `incomplete` with reason `max_output_tokens`, anything else `completed`.
 */
export function responseObject(
  shell: ResponseShell,
  status: 'in_progress' | 'completed' | 'incomplete' | 'failed',
  output: Json[],
  usage: Json | null,
  error: Json | null = null,
): Json {
  return {
    id: shell.ids.response,
    object: 'response',
    created_at: shell.createdAt,
    status,
    background: false,
    error,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    model: shell.model,
    output,
    usage,
    ...shell.echo,
  };
}

export const statusOf = (finish: string | null | undefined): 'completed' | 'incomplete' =>
  finish === 'length' ? 'incomplete' : 'completed';

export const outputText = (text: string): Json => ({
  type: 'output_text',
  text,
  annotations: [],
  logprobs: [],
});

export const messageItem = (id: string, status: string, content: Json[]): Json => ({
  id,
  type: 'message',
  status,
  role: 'assistant',
  content,
});

export const reasoningItem = (id: string, text: string | null): Json => ({
  id,
  type: 'reasoning',
  summary: [],
  content: text === null ? [] : [{ type: 'reasoning_text', text }],
});

export const functionCallItem = (
  id: string,
  callId: string,
  name: string,
  args: string,
  status: string,
): Json => ({
  id,
  type: 'function_call',
  status,
  call_id: callId,
  name,
  arguments: args,
});

/**
 * An input item as stored and listed by `GET /v1/responses/{id}/input_items` (`ResponseItem` in the
 * SDK's responses.d.ts): every item has an id, and a message's content is a list of parts even when the
 * request sent a string (`ResponseInputMessageItem.content` is `input_text` parts; an assistant
 * message is a `ResponseOutputMessage` with `output_text` parts).
 */
export function storedInputItem(item: Json, id: string): Json {
  const withId = typeof item.id === 'string' ? item : { ...item, id };
  if (withId.type !== 'message') return withId;
  const assistant = withId.role === 'assistant';
  const content =
    typeof withId.content === 'string'
      ? [assistant ? outputText(withId.content) : { type: 'input_text', text: withId.content }]
      : withId.content;
  return { ...withId, content, status: withId.status ?? 'completed' };
}

/** A non-stream chat completion → the output items and status of its Response. */
export function chatToOutput(
  chat: ChatChunk,
  ids: ResponseIds,
): { output: Json[]; status: 'completed' | 'incomplete' } {
  const choice = chat.choices?.[0];
  const msg = choice?.message ?? {};
  const output: Json[] = [];
  const reasoning = reasoningOf(msg);
  if (typeof reasoning === 'string' && reasoning !== '')
    output.push(reasoningItem(ids.reasoning(0), reasoning));
  if (typeof msg.content === 'string' && msg.content !== '')
    output.push(messageItem(ids.message(), 'completed', [outputText(msg.content)]));
  (msg.tool_calls ?? []).forEach((call, k) => {
    const i = call.index ?? k;
    output.push(
      functionCallItem(
        ids.functionCall(i),
        ids.callId(i),
        call.function?.name ?? '',
        call.function?.arguments ?? '',
        'completed',
      ),
    );
  });
  return { output, status: statusOf(choice?.finish_reason) };
}
