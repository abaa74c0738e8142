import { Template } from '@huggingface/jinja';

/**
 * A model's chat template rendered as vLLM's OpenAI server renders it: through Hugging Face
 * `apply_chat_template` (transformers utils/chat_template_utils.py: context `messages`, `tools`,
 * `add_generation_prompt`, the tokenizer's special tokens, then `chat_template_kwargs`), here with
 * `@huggingface/jinja`, the JavaScript port of that renderer (it provides `raise_exception` itself).
 * Message content given as parts is flattened as vLLM's "string" content format does
 * (vllm/entrypoints/chat_utils.py `_parse_chat_message_content_parts`: text parts joined with "\n");
 * a non-text part cannot be tokenised here ({@link UnsupportedPromptError}).
 */

export class UnsupportedPromptError extends Error {}

export interface ChatInput {
  readonly messages: readonly unknown[];
  readonly tools?: readonly unknown[] | undefined;
  /** OpenAI `add_generation_prompt` (vLLM default true). */
  readonly addGenerationPrompt?: boolean | undefined;
  /** vLLM's `chat_template_kwargs` (e.g. `enable_thinking`). */
  readonly chatTemplateKwargs?: Record<string, unknown> | undefined;
}

/** tokenizer_config.json's `chat_template`: a string, or a list of named templates (`default` wins). */
export function templateSource(config: Record<string, unknown>, jinjaFile: string | null): string | null {
  const value = config.chat_template;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = value as Array<{ name?: unknown; template?: unknown }>;
    const pick = named.find((t) => t.name === 'default') ?? named[0];
    if (typeof pick?.template === 'string') return pick.template;
  }
  return jinjaFile; // transformers ≥ 4.43 saves it beside the config as chat_template.jinja
}

/** A special token as tokenizer_config.json writes it: a string or an AddedToken `{content}`. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return undefined;
}

function flattenContent(message: unknown): unknown {
  if (!message || typeof message !== 'object') return message;
  const content = (message as { content?: unknown }).content;
  if (!Array.isArray(content)) return message;
  const texts: string[] = [];
  for (const part of content as Array<{ type?: unknown; text?: unknown }>) {
    if (part?.type !== 'text' || typeof part.text !== 'string')
      throw new UnsupportedPromptError(
        `content part of type '${String(part?.type)}' is not tokenised by Motor`,
      );
    texts.push(part.text);
  }
  return { ...message, content: texts.join('\n') };
}

export class ChatTemplate {
  private readonly template: Template;
  private readonly specials: Record<string, string> = {};

  constructor(source: string, config: Record<string, unknown>) {
    this.template = new Template(source);
    for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const text = tokenText(config[key]);
      if (text !== undefined) this.specials[key] = text;
    }
  }

  render(input: ChatInput): string {
    return this.template.render({
      messages: input.messages.map(flattenContent),
      tools: input.tools ?? null,
      add_generation_prompt: input.addGenerationPrompt ?? true,
      ...this.specials,
      ...input.chatTemplateKwargs,
    });
  }
}
