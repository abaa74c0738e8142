import { Worker } from 'node:worker_threads';
import type { BlockHasherOptions, BlockHashExtraKeys } from '../kv-hash/index.js';
import { UnsupportedPromptError } from './chat-template.js';
import type { TokenizeInput, TokenizeRequest, WorkerReply, WorkerSetup } from './tokenizer-protocol.js';

export interface TokenizerClientOptions {
  /** Directory with the model's tokenizer.json and tokenizer_config.json. */
  readonly dir: string;
  /** Prompts remembered (least recently used dropped first); 0 = no cache. */
  readonly cacheEntries?: number;
  /** Also hash each prompt's blocks as the engine does (see src/kv-hash). */
  readonly blockHash?: BlockHasherOptions;
}

export interface TokenizedPrompt {
  readonly tokenIds: Uint32Array;
  /** The prompt's full blocks as KV-event keys (`eventBlockHash`); null without `blockHash`. */
  readonly blockKeys: BigUint64Array | null;
}

interface Pending {
  resolve(value: TokenizedPrompt): void;
  reject(err: Error): void;
}

/** Under vitest/tsx this module is TypeScript: its worker is too, loaded through tsx. */
function spawn(setup: WorkerSetup): Worker {
  const self = import.meta.url;
  if (!self.endsWith('.ts')) return new Worker(new URL('./tokenizer-worker.js', self), { workerData: setup });
  const worker = new URL('./tokenizer-worker.ts', self).href;
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((tsx) => tsx.tsImport(${JSON.stringify(worker)}, ${JSON.stringify(self)}))`;
  return new Worker(code, { eval: true, workerData: setup });
}

/**
 * Tokenises prompts with the model's own tokenizer in a worker thread (loading a tokenizer.json
 * takes seconds and encoding a long prompt milliseconds: neither may block the event loop), with an
 * LRU cache of recent prompts (a conversation's next turn re-sends the same messages). Concurrent
 * requests for the same prompt share one worker call.
 */
export class TokenizerClient {
  private readonly pending = new Map<number, Pending>();
  private readonly cache = new Map<string, Promise<TokenizedPrompt>>();
  private nextId = 1;
  private failure: Error | null = null;
  hits = 0;
  misses = 0;

  private constructor(
    private readonly worker: Worker,
    private readonly options: TokenizerClientOptions,
  ) {}

  /** Starts the worker; resolves once the model's files are loaded, rejects with one line if not. */
  static async start(options: TokenizerClientOptions): Promise<TokenizerClient> {
    const worker = spawn({ dir: options.dir, blockHash: options.blockHash });
    const client = new TokenizerClient(worker, options);
    await new Promise<void>((resolve, reject) => {
      const fail = (message: string): void => {
        void worker.terminate();
        reject(new Error(`tokenizer ${options.dir}: ${message}`));
      };
      worker.once('message', (reply: WorkerReply) => {
        if (reply.type === 'ready') resolve();
        else fail(reply.type === 'load-failed' ? reply.message : `unexpected first message '${reply.type}'`);
      });
      worker.once('error', (err) => fail(err.message));
    });
    worker.on('message', (reply: WorkerReply) => client.onReply(reply));
    worker.on('error', (err) => client.fail(`tokenizer worker for ${options.dir} failed: ${err.message}`));
    worker.on('exit', (code) => client.fail(`tokenizer worker for ${options.dir} exited (code ${code})`));
    worker.unref();
    return client;
  }

  /**
   * The prompt's token ids (and block keys) as the engine computes them. Rejects with
   * {@link UnsupportedPromptError} for a prompt this tokenizer cannot reproduce (the caller falls back
   * to approximate routing), or a plain Error when the worker is gone.
   */
  tokenize(input: TokenizeInput, extraKeys?: BlockHashExtraKeys): Promise<TokenizedPrompt> {
    const limit = this.options.cacheEntries ?? 1024;
    const key = limit > 0 ? JSON.stringify([input, this.options.blockHash ? (extraKeys ?? null) : null]) : '';
    const cached = limit > 0 ? this.cache.get(key) : undefined;
    if (cached) {
      this.hits++;
      this.cache.delete(key); // re-inserted: most recently used last
      this.cache.set(key, cached);
      return cached;
    }
    this.misses++;
    const result = this.call({ id: this.nextId++, input, extraKeys });
    if (limit > 0) {
      this.cache.set(key, result);
      if (this.cache.size > limit) this.cache.delete(this.cache.keys().next().value!);
      result.catch(() => this.cache.delete(key));
    }
    return result;
  }

  /** Stops the worker; pending calls reject. */
  async close(): Promise<void> {
    this.fail('tokenizer closed');
    await this.worker.terminate();
  }

  get cacheSize(): number {
    return this.cache.size;
  }

  private call(request: TokenizeRequest): Promise<TokenizedPrompt> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<TokenizedPrompt>((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref(); // an idle worker does not keep the process alive
      this.pending.set(request.id, { resolve, reject });
      this.worker.postMessage(request);
    });
  }

  private onReply(reply: WorkerReply): void {
    if (reply.type !== 'result' && reply.type !== 'error') return;
    const waiter = this.pending.get(reply.id);
    if (!waiter) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.type === 'result') waiter.resolve({ tokenIds: reply.tokenIds, blockKeys: reply.blockKeys });
    else
      waiter.reject(reply.unsupported ? new UnsupportedPromptError(reply.message) : new Error(reply.message));
  }

  private fail(message: string): void {
    this.failure ??= new Error(message);
    for (const waiter of this.pending.values()) waiter.reject(this.failure);
    this.pending.clear();
  }
}
