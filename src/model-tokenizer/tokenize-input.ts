import type { TokenizeInput } from './tokenizer-protocol.js';

const UNREPRODUCED_CHAT_FIELDS = ['chat_template', 'continue_final_message', 'documents'] as const;

/**
 * What the tokenizer worker needs of an OpenAI chat or completions body; null when the model
 * tokenizer cannot reproduce the engine's prompt (a request's own `chat_template`,
 * `continue_final_message`, `documents`, batched prompts). Shared by the coordinator's block keys
 * (src/coordinator/kv-routing/prompt-block-keys.ts) and the simulator's vLLM-style hashing.
 */
export function tokenizeInputOf(
  kind: 'chat' | 'completion',
  body: Record<string, unknown>,
): TokenizeInput | null {
  if (kind === 'completion') {
    const prompt = body.prompt;
    if (typeof prompt === 'string') return { kind: 'prompt', prompt };
    if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((t) => Number.isInteger(t)))
      return { kind: 'tokens', tokenIds: prompt as number[] };
    return null;
  }
  if (
    UNREPRODUCED_CHAT_FIELDS.some(
      (field) => body[field] !== undefined && body[field] !== null && body[field] !== false,
    )
  )
    return null;
  const kwargs = body.chat_template_kwargs;
  return {
    kind: 'chat',
    chat: {
      messages: body.messages as unknown[],
      tools: Array.isArray(body.tools) ? body.tools : undefined,
      addGenerationPrompt:
        typeof body.add_generation_prompt === 'boolean' ? body.add_generation_prompt : undefined,
      chatTemplateKwargs:
        kwargs && typeof kwargs === 'object' ? (kwargs as Record<string, unknown>) : undefined,
    },
  };
}
