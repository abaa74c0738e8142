import { PrefixIndex } from '../../scheduling/index.js';
import type { RoutingOp } from './routing-messages.js';

/**
 * A cache-aware scorer's routed-history index whose records reach the other replicas: each local
 * `record` is published (op `i`, at most `maxBlocksPerOp` leading blocks: the head of a prompt is
 * what affinity matches first), and {@link applyRemote} records what another replica routed.
 * Only operations travel, never the whole structure, as SGLang's gateway mesh syncs its
 * cache-aware radix tree (sgl-project/sglang sgl-model-gateway/src/mesh/README.md, "Cache-Aware
 * Routing": insert operations per routed request, applied by every node).
 */
export class SyncedPrefixIndex extends PrefixIndex {
  constructor(
    readonly scope: string,
    capacityBlocks: number,
    private readonly publish: (op: RoutingOp) => void,
    private readonly maxBlocksPerOp: number,
  ) {
    super({ capacityBlocks });
  }

  override record(instanceId: string, hashes: readonly number[]): void {
    super.record(instanceId, hashes);
    if (hashes.length === 0) return;
    // the scheduler's hashes are a fresh array per decision: sent as they are unless too long
    const sent = hashes.length > this.maxBlocksPerOp ? hashes.slice(0, this.maxBlocksPerOp) : hashes;
    this.publish(['i', this.scope, instanceId, sent]);
  }

  /** Another replica routed these blocks to `instanceId`. */
  applyRemote(instanceId: string, hashes: readonly number[]): void {
    super.record(instanceId, hashes);
  }
}
