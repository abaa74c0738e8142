import type { BlockHasherOptions, BlockHashExtraKeys } from '../kv-hash/index.js';
import type { ChatInput } from './chat-template.js';

/** Messages between {@link TokenizerClient} and its worker (tokenizer-worker.ts). */

export type TokenizeInput =
  | { readonly kind: 'chat'; readonly chat: ChatInput }
  | { readonly kind: 'prompt'; readonly prompt: string }
  /** A completions prompt given as token ids: used as they are (only hashed). */
  | { readonly kind: 'tokens'; readonly tokenIds: readonly number[] };

export interface WorkerSetup {
  readonly dir: string;
  /** When set, each reply also carries the prompt's block hashes as KV-event keys. */
  readonly blockHash?: BlockHasherOptions | undefined;
}

export interface TokenizeRequest {
  readonly id: number;
  readonly input: TokenizeInput;
  readonly extraKeys?: BlockHashExtraKeys | undefined;
}

export type WorkerReply =
  | { readonly type: 'ready' }
  | { readonly type: 'load-failed'; readonly message: string }
  | {
      readonly type: 'result';
      readonly id: number;
      readonly tokenIds: Uint32Array;
      readonly blockKeys: BigUint64Array | null;
    }
  | { readonly type: 'error'; readonly id: number; readonly message: string; readonly unsupported: boolean };
