import type { Logger } from '../../common/logger.js';
import type { KvEventsHub } from '../../kv-events/kv-events-hub.js';
import { predictedCachedTokens } from '../../kv-hash/index.js';
import type { KvPrediction } from '../../scheduling/index.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import type { ExpectationPublisher } from '../../state/routing-sync/routing-sync.js';
import { InflightBlocks } from './kv-inflight.js';
import type { GroupPrompt, PromptBlockKeys } from './prompt-block-keys.js';

export interface KvPredictorOptions {
  /** How long a routed request's blocks count as held before its engine's events show them (ms; 0 = off). */
  inflightTtlMs: number;
  /** Bound on in-flight block expectations over all instances. */
  maxInflightBlocks: number;
  now?: () => number;
}

/**
 * What the engines' KV events predict for one client request (issue 17, the `precise-prefix` scorer):
 * the prompt's block keys per `kvHash` group (through the group's tokenizer worker), looked up in the
 * KV block index, turned into the cached tokens each instance will report
 * (`predictedCachedTokens`). Only instances whose event stream is up and has delivered a batch are
 * predicted; the scorer falls back to its routed-history estimate for the others. Never rejects: a
 * tokenizer failure is logged once and the request is routed approximately.
 *
 * Routing also sees this coordinator's requests in flight ({@link InflightBlocks}): the longest prefix
 * held in events ∪ expected goes to `expectedCachedTokens`, while `cachedTokens` stays the events-only
 * prediction that the engine's reported `cached_tokens` is compared with (`motor doctor`).
 */
export class KvPredictor {
  private warned = false;
  readonly inflight: InflightBlocks;
  /** Set when routing state is shared: each expectation is published too. */
  publisher: ExpectationPublisher | null = null;

  constructor(
    readonly keys: PromptBlockKeys,
    private readonly hub: KvEventsHub,
    private readonly log: Logger,
    opts: KvPredictorOptions = { inflightTtlMs: 0, maxInflightBlocks: 1 },
  ) {
    this.inflight = new InflightBlocks(opts.inflightTtlMs, opts.maxInflightBlocks, opts.now);
    if (opts.inflightTtlMs > 0)
      hub.index.onStored = (instance, keys) => this.inflight.confirm(instance, keys);
  }

  async predict(client: ClientRequest): Promise<KvPrediction | undefined> {
    let prompts: ReadonlyMap<string, GroupPrompt>;
    try {
      prompts = await this.keys.prompts(client);
    } catch (err) {
      if (!this.warned) this.log.warn({ err: (err as Error).message }, 'precise prefix: tokenizer failed');
      this.warned = true;
      return undefined;
    }
    if (prompts.size === 0) return undefined;
    const cachedTokens = new Map<string, number>();
    let expectedCachedTokens: Map<string, number> | undefined;
    let promptTokens: number | undefined;
    for (const [group, prompt] of prompts) {
      promptTokens ??= prompt.promptTokens;
      const held = this.hub.index.prefixMatch(prompt.blockKeys);
      for (const s of this.hub.status()) {
        if (s.error !== null || s.lastSeq === null) continue;
        if (this.keys.groupOf(s.instance, client.model) !== group) continue;
        const blocks = held.get(s.instance) ?? 0;
        const { promptTokens: n, blockSize } = prompt;
        cachedTokens.set(s.instance, predictedCachedTokens(blocks, n, blockSize));
        const more = this.inflight.run(s.instance, prompt.blockKeys, blocks);
        if (more > 0)
          (expectedCachedTokens ??= new Map()).set(
            s.instance,
            predictedCachedTokens(blocks + more, n, blockSize),
          );
      }
    }
    if (promptTokens === undefined) return undefined;
    return this.inflight.ttlMs > 0
      ? this.tracked(client, prompts, { promptTokens, cachedTokens, expectedCachedTokens })
      : { promptTokens, cachedTokens };
  }

  /** The prediction with `routed` / `release` recording this request's blocks as in flight. */
  private tracked(
    client: ClientRequest,
    prompts: ReadonlyMap<string, GroupPrompt>,
    p: Pick<KvPrediction, 'promptTokens' | 'cachedTokens' | 'expectedCachedTokens'>,
  ): KvPrediction {
    const inflight = this.inflight;
    const publisher = this.publisher;
    const routes: [string, BigUint64Array, string | null][] = [];
    return {
      ...p,
      routed: (instance) => {
        if (!p.cachedTokens.has(instance)) return; // no live event stream: nothing would confirm it
        const prompt = prompts.get(this.keys.groupOf(instance, client.model) ?? '');
        if (prompt === undefined) return;
        inflight.expect(instance, prompt.blockKeys);
        routes.push([instance, prompt.blockKeys, publisher?.expected(instance, prompt.blockKeys) ?? null]);
      },
      release: () => {
        for (const [instance, keys, routeId] of routes) {
          inflight.release(instance, keys);
          if (routeId !== null) publisher?.released(routeId);
        }
        routes.length = 0;
      },
    };
  }

  close(): Promise<void> {
    return this.keys.close();
  }
}
