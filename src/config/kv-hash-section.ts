import { z } from 'zod';
import { BLOCK_HASH_ALGOS } from '../kv-hash/index.js';

/**
 * The coordinator's `kvHash` section (its own module: coordinator-config.ts is at its size limit):
 * per group of instances, the model's own tokenizer and the engine's block-hash settings, so Motor
 * computes the block hashes the engines publish in their KV events (src/kv-hash, src/model-tokenizer).
 * The `precise-prefix` scorer routes on it (src/coordinator/kv-routing/kv-prediction.ts, docs/coordinator.md).
 */

const tokenizerSchema = z
  .strictObject({
    path: z
      .string()
      .min(1)
      .describe(
        "local directory holding the model's `tokenizer.json` and `tokenizer_config.json` (and optionally " +
          '`chat_template.jinja`): the same files the engine loads; nothing is downloaded',
      ),
    cacheEntries: z
      .int()
      .min(0)
      .default(1024)
      .describe(
        'recent prompts whose token ids are remembered (least recently used dropped first); 0 = none',
      ),
  })
  .describe("the model's tokenizer and chat template, run in a worker thread");

const blockHashSchema = z
  .strictObject({
    algo: z
      .enum(BLOCK_HASH_ALGOS)
      .default('sha256')
      .describe("the engine's `--prefix-caching-hash-algo` (vLLM's default since v0.10.2: `sha256`)"),
    blockSize: z.int().min(1).default(16).describe("the engine's `--block-size` (tokens per KV block)"),
    seed: z
      .string()
      .describe(
        "the engine process's `PYTHONHASHSEED`, exactly as set (e.g. `'0'`); required — without it vLLM " +
          'seeds its block hashes with random bytes and no router can predict them',
      ),
  })
  .describe('how the engines of this group hash prompt blocks (vLLM v0.10.2 and later)');

export const kvHashGroupSchema = z
  .strictObject({
    name: z.string().min(1).describe('the group in logs, metrics and `motor doctor`'),
    models: z
      .array(z.string().min(1))
      .min(1)
      .describe('the served model names this group covers (as in `instances[].models`)'),
    instances: z
      .array(z.string().min(1))
      .optional()
      .describe('instance ids of the group; absent: every instance serving one of `models`'),
    tokenizer: tokenizerSchema,
    blockHash: blockHashSchema,
  })
  .describe('instances that share one tokenizer and one block-hash configuration');

export const kvHashSection = z
  .strictObject({
    groups: z
      .array(kvHashGroupSchema)
      .default([])
      .superRefine((groups, ctx) => {
        const seen = new Set<string>();
        groups.forEach((group, index) => {
          if (seen.has(group.name))
            ctx.addIssue({
              code: 'custom',
              path: [index, 'name'],
              message: `duplicate group name '${group.name}'`,
            });
          seen.add(group.name);
        });
      })
      .describe('one entry per tokenizer + block-hash configuration in the fleet'),
  })
  .prefault({})
  .describe(
    "exact prefix-cache block hashes: the model's own tokenizer and the engines' hash settings " +
      '(issue 17; what the `precise-prefix` scorer routes on, with `kvEvents`)',
  );

export type KvHashGroup = z.output<typeof kvHashGroupSchema>;
