import { randomUUID } from 'node:crypto';
import type { Logger } from '../../common/logger.js';
import type { PrefixIndex } from '../../scheduling/index.js';
import type { RoutingBus } from './routing-bus.js';
import {
  keysFromHex,
  keysToHex,
  parseRoutingMessage,
  type IndexEntry,
  type OwnState,
  type RoutingMessage,
  type RoutingOp,
} from './routing-messages.js';
import { SharedLoadTracker } from './shared-load-tracker.js';
import { SyncedPrefixIndex } from './synced-prefix-index.js';

/** The in-flight KV expectations of precise routing (the coordinator's `InflightBlocks`). */
export interface ExpectationStore {
  readonly ttlMs: number;
  expect(instance: string, keys: ArrayLike<bigint>): void;
  release(instance: string, keys: ArrayLike<bigint>): void;
}

/** What the precise-routing predictor calls besides its own store: publishes its expectations. */
export interface ExpectationPublisher {
  /** This replica expects `keys` on `instance`; returns the id {@link released} takes. */
  expected(instance: string, keys: ArrayLike<bigint>): string;
  released(routeId: string): void;
}

export interface RoutingSyncOptions {
  bus: RoutingBus;
  log: Logger;
  /** Unique per process start (default a random UUID). */
  replicaId?: string;
  /** Operations wait at most this long to be sent together (ms; one batch per tick at 0). */
  flushMs?: number;
  /** A batch is sent once it holds this many operations. */
  maxOpsPerBatch?: number;
  /** Leading prompt blocks sent per index record. */
  maxBlocksPerOp?: number;
  /** Longer inbound messages are dropped (state answers with an index are the large ones). */
  maxMessageBytes?: number;
  /** Blocks of routed history a state answer carries, over all instances and scorers. */
  maxSnapshotBlocks?: number;
  /** Silence after which a heartbeat (an empty batch) is sent (ms). */
  heartbeatMs?: number;
  /** A replica not heard from for this long is gone: its loads and expectations are dropped (ms). */
  peerTimeoutMs?: number;
  /** Start-up waits at most this long for the siblings' state (ms). */
  warmStartTimeoutMs?: number;
  now?: () => number;
}

export type WarmStart = 'pending' | 'alone' | 'loaded' | 'timeout' | 'bus-down';

export interface RoutingSyncStats {
  connected: boolean;
  peers: number;
  warmStart: WarmStart;
  opsSent: number;
  opsReceived: number;
  /** Operations not sent because the bus was down. */
  opsDropped: number;
  messagesSent: number;
  bytesSent: number;
  /** Inbound messages refused (malformed, oversized, another version). */
  messagesRejected: number;
  /** Lost broadcasts noticed (a sequence gap), each answered by a state exchange with that replica. */
  gaps: number;
  outages: number;
  /** State answers received (warm start, back after an outage, after a gap): the replicas converged. */
  statesReceived: number;
}

interface RemoteLoad {
  readonly instance: string;
  readonly tokens: number;
  pending: number;
}

interface RemoteRoute {
  readonly instance: string;
  readonly keys: BigUint64Array;
  readonly atMs: number;
}

interface Peer {
  lastSeenMs: number;
  seq: number;
  readonly loads: Map<string, RemoteLoad>;
  readonly routes: Map<string, RemoteRoute>;
}

interface OwnRoute {
  readonly instance: string;
  readonly keysHex: string;
  readonly atMs: number;
}

const MAX_REMOTE_PER_PEER = 100_000;

/**
 * One replica's side of routing state shared between coordinator replicas (or `--workers`): the
 * effects of its routing decisions — routed-history index records, load begun / prefilled / ended
 * (decode reservations included), expected KV blocks — are published in batches, and the other
 * replicas' are applied here, so every replica routes as if it had made all the decisions.
 *
 * Batching follows Dynamo's active-sequence replica sync (ai-dynamo/dynamo
 * lib/kv-router/src/protocols.rs: `MAX_REPLICA_BATCH_EVENTS` 256, `MAX_REPLICA_BATCH_DURATION`
 * 1 ms); as there, a sender's own echo is skipped by its id, and what grows per token (output) is not
 * synced. Catching up follows SGLang's gateway mesh (sgl-project/sglang
 * sgl-model-gateway/src/mesh/README.md, "State Restoration on Startup"): a joining replica loads the
 * routed-history state from the mesh before it routes.
 *
 * Bus away: each replica routes on its own state (one warning, counted in stats); the other
 * replicas' loads and expectations are dropped (nobody would end them), the index they taught stays.
 * Back: state is exchanged with every replica (`h` → `s`), so loads converge and the index merges.
 * A lost broadcast (sequence gap) triggers the same exchange with its sender alone.
 */
export class RoutingSync {
  readonly replicaId: string;
  readonly loads: SharedLoadTracker;
  private readonly bus: RoutingBus;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly opts: Required<Omit<RoutingSyncOptions, 'bus' | 'log' | 'replicaId' | 'now'>>;
  private readonly indexes = new Map<string, SyncedPrefixIndex>();
  private readonly peers = new Map<string, Peer>();
  private readonly ownRoutes = new Map<string, OwnRoute>();
  private expectations: ExpectationStore | null = null;
  private pending: RoutingOp[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private seq = 0;
  private lastSentMs = 0;
  private nextRoute = 0;
  private started = false;
  private closed = false;
  /** Merge the next index that arrives (joined, or back after an outage). */
  private wantIndex = false;
  private downSinceMs: number | null = null;
  private warmWaiter: { need: number; got: Set<string>; done: () => void } | null = null;
  readonly stats: RoutingSyncStats = {
    connected: false,
    peers: 0,
    warmStart: 'pending',
    opsSent: 0,
    opsReceived: 0,
    opsDropped: 0,
    messagesSent: 0,
    bytesSent: 0,
    messagesRejected: 0,
    gaps: 0,
    outages: 0,
    statesReceived: 0,
  };

  constructor(options: RoutingSyncOptions) {
    this.bus = options.bus;
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.replicaId = options.replicaId ?? randomUUID();
    this.opts = {
      flushMs: options.flushMs ?? 1,
      maxOpsPerBatch: options.maxOpsPerBatch ?? 256,
      maxBlocksPerOp: options.maxBlocksPerOp ?? 2048,
      maxMessageBytes: options.maxMessageBytes ?? 16 * 1024 * 1024,
      maxSnapshotBlocks: options.maxSnapshotBlocks ?? 262_144,
      heartbeatMs: options.heartbeatMs ?? 1000,
      peerTimeoutMs: options.peerTimeoutMs ?? 5000,
      warmStartTimeoutMs: options.warmStartTimeoutMs ?? 3000,
    };
    this.loads = new SharedLoadTracker((op) => this.publish(op));
  }

  /**
   * The scheduler's `newPrefixIndex`: each cache-aware scorer's index, named by creation order and
   * capacity (replicas built from one config create them alike).
   */
  readonly newPrefixIndex = (capacityBlocks: number): PrefixIndex => {
    const scope = `${this.indexes.size}:${capacityBlocks}`;
    const index = new SyncedPrefixIndex(
      scope,
      capacityBlocks,
      (op) => this.publish(op),
      this.opts.maxBlocksPerOp,
    );
    this.indexes.set(scope, index);
    return index;
  };

  /** Shares precise routing's expected blocks: other replicas' are applied to `store`. */
  shareExpectations(store: ExpectationStore): ExpectationPublisher {
    this.expectations = store;
    return {
      expected: (instance, keys) => {
        const routeId = (this.nextRoute++).toString(36);
        const keysHex = keysToHex(keys);
        this.pruneOwnRoutes();
        this.ownRoutes.set(routeId, { instance, keysHex, atMs: this.now() });
        this.publish(['x', routeId, instance, keysHex]);
        return routeId;
      },
      released: (routeId) => {
        if (this.ownRoutes.delete(routeId)) this.publish(['y', routeId]);
      },
    };
  }

  /**
   * Subscribes and loads the siblings' state (warm start) before resolving: the replica reports
   * ready only after. A bus that is down, or siblings that do not answer in time, do not hold the
   * start-up: the replica starts on its own state (and converges when they come).
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.bus.start(this.replicaId, {
      message: (text) => this.onMessage(text),
      up: () => this.onUp(),
      down: (reason) => this.onDown(reason),
    });
    this.sweepTimer = setInterval(() => this.sweep(), this.opts.heartbeatMs);
    this.sweepTimer.unref();
    if (!this.stats.connected) {
      this.stats.warmStart = 'bus-down';
      return;
    }
    const others = await this.bus.peers();
    if (others === 0) {
      this.stats.warmStart = 'alone';
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.warmWaiter = null;
        this.stats.warmStart = 'timeout';
        this.log.warn(
          { replica: this.replicaId, expected: others, answered: this.peers.size },
          'routing sync: siblings did not all send their state in time; starting with what arrived',
        );
        resolve();
      }, this.opts.warmStartTimeoutMs);
      this.warmWaiter = {
        need: others,
        got: new Set(),
        done: () => {
          clearTimeout(timer);
          this.warmWaiter = null;
          this.stats.warmStart = 'loaded';
          resolve();
        },
      };
      this.hello(undefined, true);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.flush();
    if (this.flushTimer) clearTimeout(this.flushTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.warmWaiter?.done();
    await this.bus.close();
  }

  /** Queues one operation for the next batch (dropped, and counted, while the bus is down). */
  private publish(op: RoutingOp): void {
    if (!this.stats.connected || this.closed) {
      this.stats.opsDropped++;
      return;
    }
    this.pending.push(op);
    if (this.pending.length >= this.opts.maxOpsPerBatch) this.flush();
    else if (this.flushTimer === null) this.flushTimer = setTimeout(() => this.flush(), this.opts.flushMs);
  }

  private flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.pending.length === 0) return;
    const ops = this.pending;
    this.pending = [];
    this.send({ v: 1, t: 'b', from: this.replicaId, seq: ++this.seq, ops }, undefined, ops.length);
  }

  private send(m: RoutingMessage, to: string | undefined, ops = 0): void {
    const text = JSON.stringify(m);
    const sent = to === undefined ? this.bus.broadcast(text) : this.bus.direct(to, text);
    if (!sent) {
      this.stats.opsDropped += ops;
      return;
    }
    this.stats.messagesSent++;
    this.stats.bytesSent += text.length;
    this.stats.opsSent += ops;
    if (to === undefined) this.lastSentMs = this.now();
  }

  private ownState(): OwnState {
    this.pruneOwnRoutes();
    return {
      loads: Array.from(this.loads.own, ([id, l]) => [id, l.instance, l.tokens, l.pending] as const),
      routes: Array.from(this.ownRoutes, ([id, r]) => [id, r.instance, r.keysHex] as const),
    };
  }

  /** Sends this replica's state and asks for theirs: to all (`to` undefined) or to one replica. */
  private hello(to: string | undefined, wantIndex: boolean): void {
    this.flush(); // operations already queued go first: the state below includes their effects
    if (wantIndex) this.wantIndex = true;
    const seq = to === undefined ? ++this.seq : this.seq;
    this.send({ v: 1, t: 'h', from: this.replicaId, seq, wantIndex, state: this.ownState() }, to);
  }

  /** Every scorer's routed history, the newest blocks of each instance within `maxSnapshotBlocks` in all. */
  private indexSnapshot(): IndexEntry[] {
    let instances = 0;
    for (const index of this.indexes.values()) instances += index.instanceCount;
    const perInstance = Math.max(1, Math.floor(this.opts.maxSnapshotBlocks / Math.max(1, instances)));
    const out: IndexEntry[] = [];
    for (const index of this.indexes.values())
      for (const e of index.snapshot(perInstance)) out.push([index.scope, e.instance, e.hashes, e.heads]);
    return out;
  }

  private onMessage(text: string): void {
    const m = parseRoutingMessage(text, this.opts.maxMessageBytes);
    if (m === null) {
      this.stats.messagesRejected++;
      return;
    }
    if (m.from === this.replicaId) return; // our own broadcast, echoed
    let peer = this.peers.get(m.from);
    const known = peer !== undefined;
    if (peer === undefined) {
      peer = { lastSeenMs: 0, seq: 0, loads: new Map(), routes: new Map() };
      this.peers.set(m.from, peer);
      this.stats.peers = this.peers.size;
    }
    peer.lastSeenMs = this.now();
    switch (m.t) {
      case 'b':
        if (known && m.seq > peer.seq + 1) {
          // lost broadcasts: its loads are unknown until it sends its state again
          this.stats.gaps++;
          this.hello(m.from, false);
        } else if (!known && this.warmWaiter === null && !this.wantIndex) this.hello(m.from, false);
        peer.seq = Math.max(peer.seq, m.seq);
        this.stats.opsReceived += m.ops.length;
        for (const op of m.ops) this.apply(peer, op);
        return;
      case 'h': {
        peer.seq = Math.max(peer.seq, m.seq);
        this.replaceState(peer, m.state);
        this.flush();
        const answer: RoutingMessage = {
          v: 1,
          t: 's',
          from: this.replicaId,
          seq: this.seq,
          state: this.ownState(),
          ...(m.wantIndex && { index: this.indexSnapshot() }),
        };
        this.send(answer, m.from);
        // Back from an outage, this replica's own hello may have gone out before the sender was
        // subscribed again: ask it directly for the index still missing here.
        if (this.wantIndex && this.warmWaiter === null && m.wantIndex) this.hello(m.from, true);
        return;
      }
      case 's':
        this.stats.statesReceived++;
        peer.seq = Math.max(peer.seq, m.seq);
        this.replaceState(peer, m.state);
        if (m.index && this.wantIndex) {
          // the first sibling's index is merged; the others' would repeat it
          this.wantIndex = false;
          for (const [scope, instance, hashes, heads] of m.index)
            this.indexes.get(scope)?.restore({ instance, hashes, heads });
        }
        if (this.warmWaiter) {
          this.warmWaiter.got.add(m.from);
          if (this.warmWaiter.got.size >= this.warmWaiter.need) this.warmWaiter.done();
        }
        return;
    }
  }

  private apply(peer: Peer, op: RoutingOp): void {
    switch (op[0]) {
      case 'i':
        this.indexes.get(op[1])?.applyRemote(op[2], op[3]);
        return;
      case 'l':
        this.addLoad(peer, op[1], op[2], op[3], op[4]);
        return;
      case 'p': {
        const l = peer.loads.get(op[1]);
        if (l === undefined || l.pending === 0) return;
        this.loads.adjustRemote(l.instance, -1, 0, 0, l.pending);
        l.pending = 0;
        return;
      }
      case 'u':
        this.dropLoad(peer, op[1]);
        return;
      case 'x':
        this.addRoute(peer, op[1], op[2], op[3]);
        return;
      case 'y':
        this.dropRoute(peer, op[1]);
        return;
    }
  }

  private addLoad(peer: Peer, id: string, instance: string, tokens: number, pending: number): void {
    if (peer.loads.has(id) || peer.loads.size >= MAX_REMOTE_PER_PEER) return;
    peer.loads.set(id, { instance, tokens, pending });
    this.loads.adjustRemote(instance, 1, 1, tokens, pending);
  }

  private dropLoad(peer: Peer, id: string): void {
    const l = peer.loads.get(id);
    if (l === undefined) return;
    peer.loads.delete(id);
    this.loads.adjustRemote(l.instance, -1, 1, l.tokens, l.pending);
  }

  private addRoute(peer: Peer, id: string, instance: string, keysHex: string): void {
    const store = this.expectations;
    if (store === null || peer.routes.has(id)) return;
    this.pruneRoutes(peer);
    if (peer.routes.size >= MAX_REMOTE_PER_PEER) return;
    const keys = keysFromHex(keysHex);
    peer.routes.set(id, { instance, keys, atMs: this.now() });
    store.expect(instance, keys);
  }

  private dropRoute(peer: Peer, id: string): void {
    const r = peer.routes.get(id);
    if (r === undefined) return;
    peer.routes.delete(id);
    this.expectations?.release(r.instance, r.keys);
  }

  /** A peer's state answer replaces everything known of its loads and expectations. */
  private replaceState(peer: Peer, state: OwnState): void {
    this.forgetPeerState(peer);
    for (const [id, instance, tokens, pending] of state.loads)
      this.addLoad(peer, id, instance, tokens, pending);
    for (const [id, instance, keysHex] of state.routes) this.addRoute(peer, id, instance, keysHex);
  }

  private forgetPeerState(peer: Peer): void {
    for (const id of [...peer.loads.keys()]) this.dropLoad(peer, id);
    for (const id of [...peer.routes.keys()]) this.dropRoute(peer, id);
  }

  /** Expectations live as long as the store keeps them (its TTL); older ones are forgotten here too. */
  private pruneRoutes(peer: Peer): void {
    const ttl = this.expectations?.ttlMs ?? 0;
    const oldest = this.now() - ttl;
    for (const [id, r] of peer.routes) {
      if (r.atMs > oldest) break;
      this.dropRoute(peer, id);
    }
  }

  private pruneOwnRoutes(): void {
    const oldest = this.now() - (this.expectations?.ttlMs ?? 0);
    for (const [id, r] of this.ownRoutes) {
      if (r.atMs > oldest) break;
      this.ownRoutes.delete(id);
    }
  }

  private onUp(): void {
    this.stats.connected = true;
    const wasDown = this.downSinceMs !== null;
    this.downSinceMs = null;
    if (!wasDown || this.closed) return;
    this.log.info(
      { replica: this.replicaId, bus: this.bus.kind },
      'routing sync: bus reachable again; exchanging state with the other replicas',
    );
    this.hello(undefined, true);
  }

  private onDown(reason: string): void {
    if (this.downSinceMs === null) {
      this.downSinceMs = this.now();
      this.stats.outages++;
      this.log.warn(
        { replica: this.replicaId, bus: this.bus.kind, reason },
        "routing sync: bus unreachable; routing on this replica's own state",
      );
    }
    this.stats.connected = false;
    this.stats.opsDropped += this.pending.length;
    this.pending = [];
    for (const peer of this.peers.values()) this.forgetPeerState(peer);
    this.peers.clear();
    this.stats.peers = 0;
  }

  /** Heartbeat when quiet; drops replicas not heard from (their loads would never end here). */
  private sweep(): void {
    const now = this.now();
    if (this.stats.connected && now - this.lastSentMs >= this.opts.heartbeatMs && this.pending.length === 0)
      this.send({ v: 1, t: 'b', from: this.replicaId, seq: ++this.seq, ops: [] }, undefined);
    for (const [id, peer] of this.peers) {
      this.pruneRoutes(peer);
      if (now - peer.lastSeenMs <= this.opts.peerTimeoutMs) continue;
      this.forgetPeerState(peer);
      this.peers.delete(id);
      this.log.info({ replica: this.replicaId, peer: id }, 'routing sync: replica gone; its load dropped');
    }
    this.stats.peers = this.peers.size;
  }
}
