import type { Logger } from '../common/logger.js';
import type { KvEventsHub } from '../kv-events/kv-events-hub.js';
import { predictedCachedTokens } from '../kv-hash/index.js';
import type { KvPrediction } from '../scheduling/index.js';
import type { ClientRequest } from './client-request.js';
import type { PromptBlockKeys } from './prompt-block-keys.js';

/**
 * What the engines' KV events predict for one client request (issue 17, the `precise-prefix` scorer):
 * the prompt's block keys per `kvHash` group (through the group's tokenizer worker), looked up in the
 * KV block index, turned into the cached tokens each instance will report
 * (`predictedCachedTokens`). Only instances whose event stream is up and has delivered a batch are
 * predicted; the scorer falls back to its routed-history estimate for the others. Never rejects: a
 * tokenizer failure is logged once and the request is routed approximately.
 */
export class KvPredictor {
  private warned = false;

  constructor(
    readonly keys: PromptBlockKeys,
    private readonly hub: KvEventsHub,
    private readonly log: Logger,
  ) {}

  async predict(client: ClientRequest): Promise<KvPrediction | undefined> {
    let prompts;
    try {
      prompts = await this.keys.prompts(client);
    } catch (err) {
      if (!this.warned) this.log.warn({ err: (err as Error).message }, 'precise prefix: tokenizer failed');
      this.warned = true;
      return undefined;
    }
    if (prompts.size === 0) return undefined;
    const cachedTokens = new Map<string, number>();
    let promptTokens: number | undefined;
    for (const [group, prompt] of prompts) {
      promptTokens ??= prompt.promptTokens;
      const held = this.hub.index.prefixMatch(prompt.blockKeys);
      for (const s of this.hub.status()) {
        if (s.error !== null || s.lastSeq === null) continue;
        if (this.keys.groupOf(s.instance, client.model) !== group) continue;
        const blocks = held.get(s.instance) ?? 0;
        cachedTokens.set(s.instance, predictedCachedTokens(blocks, prompt.promptTokens, prompt.blockSize));
      }
    }
    return promptTokens === undefined ? undefined : { promptTokens, cachedTokens };
  }

  close(): Promise<void> {
    return this.keys.close();
  }
}
