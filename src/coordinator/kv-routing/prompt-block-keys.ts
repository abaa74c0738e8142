import type { Logger } from '../../common/logger.js';
import type { KvHashGroup } from '../../config/kv-hash-section.js';
import {
  TokenizerClient,
  tokenizeInputOf,
  UnsupportedPromptError,
  type TokenizeInput,
} from '../../model-tokenizer/index.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import { cacheSaltOf } from '../internal-request/cache-salt.js';

/** A prompt as one `kvHash` group's engines see it. */
export interface GroupPrompt {
  /** Its length in the model's own tokens. */
  readonly promptTokens: number;
  /** Its full blocks' keys as the engines publish them in KV events. */
  readonly blockKeys: BigUint64Array;
  readonly blockSize: number;
}

/**
 * A client request's block keys as each `kvHash` group's engines will publish them in their KV events
 * (src/kv-hash through the group's tokenizer worker): what a precise-prefix scorer looks up in the
 * KV-event index. One {@link TokenizerClient} per group; the `precise-prefix` scorer routes on it (kv-prediction.ts).
 *
 * What can be reproduced: chat requests (messages, tools, `add_generation_prompt`,
 * `chat_template_kwargs`) and completions prompts given as one string or as token ids, with the
 * `cache_salt` the engine will see. Anything else (a request's own `chat_template`,
 * `continue_final_message`, `documents`, batched prompts, non-text content) gives no keys: the caller
 * routes approximately. LoRA adapters are not modelled (their name is a hash key): list base models only.
 */
export class PromptBlockKeys {
  private constructor(
    private readonly groups: ReadonlyArray<{ group: KvHashGroup; client: TokenizerClient }>,
  ) {}

  /** Starts every group's tokenizer; a group whose files do not load is logged once and left out. */
  static async start(groups: readonly KvHashGroup[], log: Logger): Promise<PromptBlockKeys> {
    const started = await Promise.all(
      groups.map(async (group) => {
        try {
          const { path, cacheEntries } = group.tokenizer;
          const client = await TokenizerClient.start({ dir: path, cacheEntries, blockHash: group.blockHash });
          return { group, client };
        } catch (err) {
          log.error(
            { group: group.name, err: (err as Error).message },
            'kvHash group disabled: its tokenizer did not load',
          );
          return null;
        }
      }),
    );
    return new PromptBlockKeys(started.filter((g) => g !== null));
  }

  /** The group an instance belongs to for `model` (its listed instances, else every server of a model). */
  groupOf(instanceId: string, model: string): string | undefined {
    for (const { group } of this.groups) {
      if (!group.models.includes(model)) continue;
      if (group.instances === undefined || group.instances.includes(instanceId)) return group.name;
    }
    return undefined;
  }

  /** A started group's tokenizer worker (`motor doctor` tokenises its probes with it). */
  tokenizer(group: string): TokenizerClient | undefined {
    return this.groups.find((g) => g.group.name === group)?.client;
  }

  /** Per group serving the request's model, its block keys; empty when none can be computed. */
  async of(client: ClientRequest): Promise<ReadonlyMap<string, BigUint64Array>> {
    const out = new Map<string, BigUint64Array>();
    for (const [name, prompt] of await this.prompts(client)) out.set(name, prompt.blockKeys);
    return out;
  }

  /** Per group serving the request's model, the prompt as its engines see it: length and block keys. */
  async prompts(client: ClientRequest): Promise<ReadonlyMap<string, GroupPrompt>> {
    const out = new Map<string, GroupPrompt>();
    const input = tokenizeInput(client);
    if (input === null) return out;
    const cacheSalt = cacheSaltOf(client.body);
    await Promise.all(
      this.groups.map(async ({ group, client: tokenizer }) => {
        if (!group.models.includes(client.model)) return;
        try {
          const { tokenIds, blockKeys } = await tokenizer.tokenize(input, { cacheSalt });
          if (blockKeys)
            out.set(group.name, {
              promptTokens: tokenIds.length,
              blockKeys,
              blockSize: group.blockHash.blockSize,
            });
        } catch (err) {
          if (!(err instanceof UnsupportedPromptError)) throw err;
        }
      }),
    );
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.groups.map(({ client }) => client.close()));
  }
}

/** What the tokenizer worker needs of a client request; null when Motor cannot reproduce it. */
export function tokenizeInput(client: ClientRequest): TokenizeInput | null {
  return tokenizeInputOf(client.kind, client.body);
}
