import { parentPort, workerData } from 'node:worker_threads';
import { BlockHasher, eventBlockHash } from '../kv-hash/index.js';
import { UnsupportedPromptError } from './chat-template.js';
import { ModelTokenizer } from './model-tokenizer.js';
import type { TokenizeRequest, WorkerReply, WorkerSetup } from './tokenizer-protocol.js';

/** The tokenizer worker thread: loads the model's files once, then answers {@link TokenizeRequest}s. */

const port = parentPort!;
const setup = workerData as WorkerSetup;
const post = (reply: WorkerReply, transfer: ArrayBuffer[] = []): void => port.postMessage(reply, transfer);

async function main(): Promise<void> {
  let tokenizer: ModelTokenizer;
  let hasher: BlockHasher | null;
  try {
    tokenizer = await ModelTokenizer.load(setup.dir);
    hasher = setup.blockHash ? new BlockHasher(setup.blockHash) : null;
  } catch (err) {
    post({ type: 'load-failed', message: (err as Error).message });
    return;
  }
  port.on('message', (request: TokenizeRequest) => {
    try {
      const { input } = request;
      const ids =
        input.kind === 'chat'
          ? tokenizer.chatTokenIds(input.chat)
          : input.kind === 'prompt'
            ? tokenizer.promptTokenIds(input.prompt)
            : input.tokenIds;
      const tokenIds = Uint32Array.from(ids);
      let blockKeys: BigUint64Array | null = null;
      if (hasher) {
        const hashes = hasher.hashes(tokenIds, request.extraKeys);
        blockKeys = new BigUint64Array(hashes.length);
        for (let i = 0; i < hashes.length; i++) blockKeys[i] = eventBlockHash(hashes[i]!);
      }
      const transfer = [tokenIds.buffer as ArrayBuffer];
      if (blockKeys) transfer.push(blockKeys.buffer as ArrayBuffer);
      post({ type: 'result', id: request.id, tokenIds, blockKeys }, transfer);
    } catch (err) {
      const unsupported = err instanceof UnsupportedPromptError;
      post({ type: 'error', id: request.id, message: (err as Error).message, unsupported });
    }
  });
  post({ type: 'ready' });
}

void main();
