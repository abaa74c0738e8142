import type { BlockHashAlgo } from '../kv-hash/index.js';
import { TokenizerClient, tokenizeInputOf, UnsupportedPromptError } from '../model-tokenizer/index.js';
import type { GenRequest } from './request-body.js';

export interface VllmPromptOptions {
  /** Directory of the model's tokenizer.json / tokenizer_config.json (`--tokenizer`). */
  readonly dir: string;
  readonly algo: BlockHashAlgo;
  readonly blockSize: number;
  /** The PYTHONHASHSEED the simulated engine runs with (`--hash-seed`). */
  readonly seed: string;
}

/**
 * With `--tokenizer`, the simulator tokenises chat and completions prompts with the model's own
 * tokenizer and chat template (src/model-tokenizer, as vLLM's OpenAI server does) and names its
 * prefix-cache blocks by vLLM's block hashes (src/kv-hash: `--prefix-caching-hash-algo`,
 * `--hash-seed`, the request's `cache_salt` as an extra key of the first block), so its KV events
 * carry the hashes a vLLM engine would publish for the same request. A prompt the tokenizer cannot
 * reproduce keeps the simulator's own tokenisation and block hashes.
 */
export class VllmPrompt {
  private constructor(readonly client: TokenizerClient) {}

  static async start(o: VllmPromptOptions): Promise<VllmPrompt> {
    const blockHash = { algo: o.algo, blockSize: o.blockSize, seed: o.seed };
    return new VllmPrompt(await TokenizerClient.start({ dir: o.dir, blockHash }));
  }

  /** Replaces `g`'s prompt token ids and sets its block keys, when the prompt can be reproduced. */
  async apply(kind: 'chat' | 'completion', body: Record<string, unknown>, g: GenRequest): Promise<void> {
    const input = tokenizeInputOf(kind, body);
    if (input === null) return;
    const salt = body.cache_salt;
    const cacheSalt = typeof salt === 'string' && salt !== '' ? salt : undefined;
    try {
      const { tokenIds, blockKeys } = await this.client.tokenize(input, { cacheSalt });
      g.promptIds = Array.from(tokenIds);
      g.blockKeys = blockKeys === null ? undefined : Array.from(blockKeys);
    } catch (err) {
      if (!(err instanceof UnsupportedPromptError)) throw err;
    }
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
