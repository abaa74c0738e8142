import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ChatTemplate, templateSource, UnsupportedPromptError, type ChatInput } from './chat-template.js';

/**
 * A model's own tokenizer and chat template, loaded from a local directory holding `tokenizer.json`
 * and `tokenizer_config.json` (and optionally `chat_template.jinja`) — the files vLLM loads for the
 * model. Synchronous and CPU-heavy: run it in a worker ({@link TokenizerClient}), never on the
 * request path's event loop.
 *
 * What vLLM tokenises (vllm/entrypoints/openai/protocol.py, `add_special_tokens` defaults): a chat
 * request's rendered template without special tokens added (the template has them), a completions
 * prompt with them.
 */
export class ModelTokenizer {
  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly chat: ChatTemplate | null,
  ) {}

  static async load(dir: string): Promise<ModelTokenizer> {
    const read = async (name: string): Promise<string | null> => {
      try {
        return await readFile(join(dir, name), 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
    };
    const [tokenizerJson, configJson, jinja] = await Promise.all([
      read('tokenizer.json'),
      read('tokenizer_config.json'),
      read('chat_template.jinja'),
    ]);
    if (tokenizerJson === null) throw new Error(`no tokenizer.json in ${dir}`);
    const config = configJson === null ? {} : (JSON.parse(configJson) as Record<string, unknown>);
    const tokenizer = new Tokenizer(JSON.parse(tokenizerJson) as object, config);
    const source = templateSource(config, jinja);
    return new ModelTokenizer(tokenizer, source === null ? null : new ChatTemplate(source, config));
  }

  get hasChatTemplate(): boolean {
    return this.chat !== null;
  }

  /** The chat template's text for a chat request. */
  renderChat(input: ChatInput): string {
    if (!this.chat) throw new UnsupportedPromptError('the model has no chat template');
    return this.chat.render(input);
  }

  /** A chat request's prompt token ids, as vLLM computes them. */
  chatTokenIds(input: ChatInput): number[] {
    return this.encode(this.renderChat(input), false);
  }

  /** A completions prompt's token ids, as vLLM computes them. */
  promptTokenIds(prompt: string): number[] {
    return this.encode(prompt, true);
  }

  encode(text: string, addSpecialTokens: boolean): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids]);
  }
}
