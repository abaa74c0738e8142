import { reasoningOf, type ChatChunk, type ChatUsage } from '../chat-frames.js';

/** What decides `stop_sequence` vs `end_turn`: the request's `stop_sequences`. */
export interface StopInfo {
  readonly stopSequences: readonly string[];
}

/**
 * Chat `finish_reason` → Messages `stop_reason` (`StopReason`, `@anthropic-ai/sdk` 1.17
 * resources/messages/messages.d.ts). vLLM reports the stop string that matched in `stop_reason`
 * (vllm/outputs.py `CompletionOutput.stop_reason`, relayed on the chat choice): when it is one of the
 * request's `stop_sequences` the answer ended on it; an EOS (`stop_reason` null) is `end_turn`.
 */
export function stopReasonOf(
  finish: string | null,
  engineStop: string | number | null,
  stop: StopInfo,
): { stop_reason: string; stop_sequence: string | null } {
  if (finish === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (finish === 'tool_calls') return { stop_reason: 'tool_use', stop_sequence: null };
  if (typeof engineStop === 'string' && stop.stopSequences.includes(engineStop))
    return { stop_reason: 'stop_sequence', stop_sequence: engineStop };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/**
 * Chat usage → Messages `Usage`: Anthropic's `input_tokens` excludes the tokens read from cache
 * (total input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens).
 */
export function anthropicUsage(u: ChatUsage | null | undefined): Record<string, number> {
  const prompt = u?.prompt_tokens ?? 0;
  const cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    input_tokens: Math.max(0, prompt - cached),
    output_tokens: u?.completion_tokens ?? 0,
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: 0,
  };
}

/**
 * A tool_use id made from the message id and the call's position, not the engine's call id: the same
 * on every attempt of the request (a migrated stream must not change it) and on every engine.
 */
export const toolUseId = (messageId: string, index: number): string =>
  `toolu_${messageId.slice('msg_'.length)}_${index}`;

/** A Messages id from the root request id (stable across attempts, like chat's). */
export const messageIdFor = (rootRequestId: string): string =>
  `msg_${rootRequestId.replace(/^req-/, '').replace(/-/g, '')}`;

/** A non-stream chat completion → a Messages `Message`. */
export function chatToMessage(
  chat: ChatChunk,
  messageId: string,
  model: string,
  stop: StopInfo,
): Record<string, unknown> {
  const choice = chat.choices?.[0];
  const msg = choice?.message ?? {};
  const content: Record<string, unknown>[] = [];
  const reasoning = reasoningOf(msg);
  if (typeof reasoning === 'string' && reasoning !== '')
    content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  if (typeof msg.content === 'string' && msg.content !== '')
    content.push({ type: 'text', text: msg.content });
  (msg.tool_calls ?? []).forEach((call, k) => {
    content.push({
      type: 'tool_use',
      id: toolUseId(messageId, call.index ?? k),
      name: call.function?.name ?? '',
      input: parseArguments(call.function?.arguments),
    });
  });
  return {
    id: messageId,
    type: 'message',
    role: 'assistant',
    model,
    content,
    ...stopReasonOf(choice?.finish_reason ?? null, choice?.stop_reason ?? null, stop),
    usage: anthropicUsage(chat.usage),
  };
}

/** Tool arguments the model wrote: an object when they parse as one, else kept as the raw text. */
function parseArguments(args: string | null | undefined): unknown {
  if (typeof args !== 'string' || args === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : { value: v };
  } catch {
    return { raw: args };
  }
}
