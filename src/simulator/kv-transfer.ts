import type { Logger } from '../common/logger.js';
import { BootstrapRooms } from './bootstrap.js';
import { BOOTSTRAP_JOIN_PATH } from './sglang-bootstrap-server.js';
import { isIntArray, isPort, isString, requireField } from './flow.js';
import { HeldKv, PushInbox, promptHash, type BlockAllocator, type KvPayload } from './kv-handoff.js';
import type { SimOptions } from './options.js';
import { PeerClient, errorMessageOf } from './peer-client.js';
import type { PrefixCache } from './prefix-cache.js';
import type { GenRequest } from './request-body.js';
import type { Run } from './run.js';
import { SimFailure } from './sim-failure.js';
import { AbortedError, delay, transferMs } from './timing.js';

/**
 * Both sides of the simulated P/D KV transfer: the decode acquiring a prompt's KV (vLLM handoff
 * pull, vLLM trigger via the metaserver, SGLang bootstrap) and the prefill handing it over (held for
 * a pull, pushed, or offered in a bootstrap room). Owns the KV the engine keeps for its peers.
 */
export class KvTransfer {
  readonly held: HeldKv;
  readonly inbox = new PushInbox();
  readonly rooms = new BootstrapRooms();
  readonly peers = new PeerClient();
  /** Set once listening: host/port advertised in kv_transfer_params. */
  advertised = { host: '127.0.0.1', port: 0 };
  /** Decode requests waiting for remote KV: counted as waiting, but they hold no batch slot. */
  waiting = 0;

  constructor(
    private readonly opts: SimOptions,
    private readonly blocks: BlockAllocator,
    private readonly cache: PrefixCache,
    log: Logger,
  ) {
    this.held = new HeldKv(blocks, (id) => log.info({ request_id: id }, 'kv lease expired'));
  }

  /** KV held for peers (pull leases, bootstrap rooms, expected pushes), for `/debug/requests`. */
  list() {
    return [...this.held.list(), ...this.rooms.list(), ...this.inbox.list()];
  }

  /**
   * Decode side, before admission (vLLM WAITING_FOR_REMOTE_KVS): fetches the prompt's KV the way
   * the flow says, checks it was computed for this very prompt, then takes the transfer time.
   */
  async receive(run: Run): Promise<KvPayload> {
    const { g, flow } = run;
    const promptLen = g.promptIds.length;
    run.entry.state = 'waiting_kv';
    this.waiting++;
    let remote: KvPayload;
    try {
      remote =
        flow === 'handoff_decode'
          ? await this.pullKv(run)
          : flow === 'trigger_decode'
            ? await this.triggerKv(run)
            : await this.joinBootstrap(run);
    } finally {
      this.waiting--;
    }
    if (remote.prompt_hash !== promptHash(g.promptIds) || remote.num_tokens !== promptLen) {
      throw new SimFailure(
        500,
        `KV transfer mismatch for request ${run.id}: the prefill computed a different prompt (${remote.num_tokens} tokens) than this decode received (${promptLen} tokens)`,
        'kv_mismatch',
      );
    }
    await delay(transferMs(this.opts, remote.block_ids.length), run.signal);
    return remote;
  }

  /** Prefill side of trigger (push to the decode) and bootstrap (offer in the room). */
  async send(run: Run, payload: KvPayload): Promise<void> {
    if (run.flow === 'trigger_prefill') return await this.pushKv(run, payload);
    const { room } = run.g.bootstrap!;
    try {
      await this.rooms.offer(room, run.id, payload, this.opts.bootstrapTimeoutMs, run.signal);
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      throw new SimFailure(500, (err as Error).message, 'bootstrap_timeout');
    }
  }

  /** Handoff prefill, after its last token: leases the KV for the decode to pull; returns kv_transfer_params. */
  holdForPull(run: Run): Record<string, unknown> {
    const nBlocks = this.blocksFor(run.g);
    const payload = this.payload(run.g, nBlocks);
    this.held.hold(run.id, payload, this.opts.kvLeaseMs);
    this.blocks.inUse += nBlocks;
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: this.opts.engineId,
      remote_block_ids: payload.block_ids,
      remote_host: this.advertised.host,
      remote_port: this.advertised.port,
      remote_request_id: run.id,
      tp_size: 1,
    };
  }

  /** The prompt's KV as the prefill hands it over (trigger / bootstrap). */
  prefillPayload(g: GenRequest): KvPayload {
    return this.payload(g, this.blocksFor(g));
  }

  private blocksFor(g: GenRequest): number {
    return Math.ceil(g.promptIds.length / this.opts.blockSize);
  }

  private payload(g: GenRequest, nBlocks: number): KvPayload {
    const ids = this.blocks.allocate(nBlocks);
    this.blocks.free(nBlocks); // accounted by the holder (HeldKv adds its own)
    return {
      num_tokens: g.promptIds.length,
      prompt_hash: promptHash(g.promptIds),
      block_ids: ids,
      engine_id: this.opts.engineId,
    };
  }

  // ---- P/D: vLLM handoff (decode pulls from the prefill) -------------------------------------

  private async pullKv(run: Run): Promise<KvPayload> {
    const kv = run.g.kv!;
    const host = requireField(kv, 'remote_host', isString, 'a host string');
    const port = requireField(kv, 'remote_port', isPort, 'a port number');
    const engineId = requireField(kv, 'remote_engine_id', isString, 'a string');
    const blockIds = requireField(kv, 'remote_block_ids', isIntArray, 'an array of block ids');
    const remoteId = isString(kv.remote_request_id) ? kv.remote_request_id : run.id;
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/internal/kv/pull`;
    let r;
    try {
      r = await this.peers.postJson(
        url,
        {
          remote_request_id: remoteId,
          remote_engine_id: engineId,
          remote_block_ids: blockIds,
          requester_engine_id: this.opts.engineId,
        },
        this.opts.kvWaitMs,
        run.signal,
      );
    } catch (err) {
      if (run.signal.aborted) throw new AbortedError(String(run.signal.reason));
      throw new SimFailure(
        500,
        `KV transfer failed for request ${run.id}: prefill unreachable: ${(err as Error).message}`,
        'kv_unreachable',
      );
    }
    if (r.status !== 200) {
      throw new SimFailure(
        500,
        `KV transfer failed for request ${run.id}: ${errorMessageOf(r.body)}`,
        'kv_not_found',
      );
    }
    return r.body as KvPayload;
  }

  // ---- P/D: vLLM trigger (decode calls the metaserver, prefill pushes) -----------------------

  private async triggerKv(run: Run): Promise<KvPayload> {
    const { g, signal } = run;
    const metaserver = g.kv!.metaserver as string;
    const nBlocks = Math.ceil(g.promptIds.length / this.opts.blockSize);
    const blockIds = this.blocks.allocate(nBlocks);
    const localCached = this.cache.lookup(this.cache.blockHashes(g.promptIds), g.promptIds.length);
    const wait = new AbortController();
    const timer = setTimeout(() => wait.abort('kv_wait_timeout'), this.opts.kvWaitMs);
    const onAbort = (): void => wait.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const pushed = this.inbox.expect(run.id, nBlocks, this.opts.kvWaitMs, wait.signal);
    pushed.catch(() => {});
    try {
      let r;
      try {
        r = await this.peers.postJson(
          metaserver,
          {
            request_id: run.id,
            do_remote_decode: true,
            remote_block_ids: blockIds,
            remote_block_size: this.opts.blockSize,
            remote_engine_id: this.opts.engineId,
            remote_host: this.advertised.host,
            remote_port: this.advertised.port,
            remote_cached_tokens: localCached,
          },
          this.opts.kvWaitMs,
          wait.signal,
        );
      } catch (err) {
        if (signal.aborted) throw new AbortedError(String(signal.reason));
        throw new SimFailure(
          500,
          `metaserver ${metaserver} failed for request ${run.id}: ${(err as Error).message}`,
          'metaserver_unreachable',
        );
      }
      if (r.status < 200 || r.status >= 300) {
        throw new SimFailure(
          500,
          `metaserver ${metaserver} answered ${r.status} for request ${run.id}: ${errorMessageOf(r.body)}`,
          'metaserver_error',
        );
      }
      try {
        return await pushed;
      } catch (err) {
        if (signal.aborted) throw new AbortedError(String(signal.reason));
        void err;
        throw new SimFailure(
          500,
          `KV push for request ${run.id} did not arrive within ${this.opts.kvWaitMs} ms`,
          'kv_push_timeout',
        );
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.inbox.cancel(run.id);
      this.blocks.free(nBlocks);
    }
  }

  private async pushKv(run: Run, payload: KvPayload): Promise<void> {
    const kv = run.g.kv!;
    const host = requireField(kv, 'remote_host', isString, 'a host string');
    const port = requireField(kv, 'remote_port', isPort, 'a port number');
    const blockIds = requireField(kv, 'remote_block_ids', isIntArray, 'an array of block ids');
    const key = isString(kv.request_id)
      ? kv.request_id
      : isString(kv.remote_request_id)
        ? kv.remote_request_id
        : run.id;
    await delay(transferMs(this.opts, blockIds.length), run.signal);
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/internal/kv/push`;
    let r;
    try {
      r = await this.peers.postJson(
        url,
        { request_id: key, ...payload, block_ids: blockIds },
        this.opts.kvWaitMs,
        run.signal,
      );
    } catch (err) {
      if (run.signal.aborted) throw new AbortedError(String(run.signal.reason));
      throw new SimFailure(
        500,
        `KV push to decode ${host}:${port} failed: ${(err as Error).message}`,
        'kv_push_failed',
      );
    }
    if (r.status !== 200) {
      throw new SimFailure(
        500,
        `KV push to decode ${host}:${port} failed: ${errorMessageOf(r.body)}`,
        'kv_push_failed',
      );
    }
  }

  // ---- P/D: SGLang bootstrap -------------------------------------------------------------------

  private async joinBootstrap(run: Run): Promise<KvPayload> {
    const b = run.g.bootstrap!;
    // A null port means this server's own configured bootstrap port (SGLang scheduler.py
    // `handle_generate_request`), which equals the prefill's only when both use the same value.
    const port = b.port ?? this.opts.bootstrapPort;
    if (port === 0) {
      throw new SimFailure(
        400,
        'bootstrap_port is null and this server has no fixed bootstrap port (--bootstrap-port 0)',
        'bootstrap_unreachable',
      );
    }
    const url = `http://${b.host.includes(':') ? `[${b.host}]` : b.host}:${port}${BOOTSTRAP_JOIN_PATH}`;
    const timeoutMs = this.opts.bootstrapTimeoutMs;
    let r;
    try {
      r = await this.peers.postJson(
        url,
        { room: b.room, engine_id: this.opts.engineId, timeout_ms: timeoutMs },
        timeoutMs + 5_000,
        run.signal,
      );
    } catch (err) {
      if (run.signal.aborted) throw new AbortedError(String(run.signal.reason));
      throw new SimFailure(
        500,
        `bootstrap ${b.host}:${port} unreachable for room ${b.room}: ${(err as Error).message}`,
        'bootstrap_unreachable',
      );
    }
    if (r.status !== 200) {
      throw new SimFailure(
        500,
        `bootstrap failed for room ${b.room}: ${errorMessageOf(r.body)}`,
        'bootstrap_timeout',
      );
    }
    return r.body as KvPayload;
  }
}
