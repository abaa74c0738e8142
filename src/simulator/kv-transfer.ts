import type { Logger } from '../common/logger.js';
import { BootstrapRooms } from './bootstrap.js';
import { BOOTSTRAP_JOIN_PATH } from './sglang-bootstrap-server.js';
import type { EngineProfile } from './engine-profiles.js';
import { flatBlockIds, isBlockIds, isPort, isString, requireField } from './flow.js';
import { handoffParams } from './handoff-params.js';
import { HeldKv, PushInbox, promptHash, type BlockAllocator, type KvPayload } from './kv-handoff.js';
import type { SimOptions } from './options.js';
import { PeerClient, errorMessageOf } from './peer-client.js';
import type { PrefixCache } from './prefix-cache.js';
import { metaserverBody } from './metaserver-call.js';
import type { GenRequest } from './request-body.js';
import type { OutputEnd } from './response-writer.js';
import type { Run } from './run.js';
import { SimFailure } from './sim-failure.js';
import { AbortedError, delay, transferMs, type Scheduler } from './timing.js';

/** The decode heartbeats only with all of these in its params (VL nixl/base_scheduler.py on_new_request). */
const HEARTBEAT_FIELDS = ['remote_engine_id', 'remote_request_id', 'remote_host', 'remote_port', 'tp_size'];

/** `_access_metaserver` tries the POST 3 times, only when it raises (VA LW, every tag v0.13.0 … main). */
const METASERVER_TRIES = 3;

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

  /** How long unread handoff KV is held: `--kv-lease-ms`, else the profile's default. */
  readonly leaseMs: number;

  constructor(
    private readonly opts: SimOptions,
    private readonly profile: EngineProfile,
    private readonly scheduler: Scheduler,
    private readonly blocks: BlockAllocator,
    private readonly cache: PrefixCache,
    private readonly log: Logger,
  ) {
    this.held = new HeldKv(blocks, (id) => log.info({ request_id: id }, 'kv lease expired'));
    this.leaseMs = opts.kvLeaseMs ?? profile.leaseMs;
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

  /**
   * Handoff prefill, after its last token: leases the KV for the decode to pull (keyed by the
   * engine-internal id) and returns kv_transfer_params in the profile's shape — or null, holding
   * nothing, when an EOS/stop string ended it and the connector only hands over length-capped
   * requests (engine-profiles.ts `paramsOnEos`). A streamed prefill holds its KV all the same.
   */
  holdForPull(run: Run, lastTokenId: number, end: OutputEnd): Record<string, unknown> | null {
    if (end.finish !== 'length' && !this.profile.paramsOnEos) return null;
    const nBlocks = this.blocksFor(run.g);
    const payload = this.payload(run.g, nBlocks);
    this.held.hold(run.internalId, payload, this.leaseMs);
    this.blocks.inUse += nBlocks;
    const hybrid = this.opts.kvConnector === 'MooncakeHybridConnector' ? this.profile.hybridHandoff : null;
    return handoffParams(hybrid ?? this.profile.handoff ?? 'nixl-newest', {
      engineId: this.opts.engineId,
      requestId: run.internalId,
      host: this.advertised.host,
      port: this.advertised.port,
      blockIds: payload.block_ids,
      blockSize: this.opts.blockSize,
      promptTokens: run.g.promptIds.length,
      lastTokenId,
    });
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
    // Push mode: the decode does not read the prefill's block ids; the prefill learns the decode's
    // blocks from the registration (VL nixl/push_scheduler.py update_state_after_alloc seeds `()`).
    const push = this.profile.pushRegistrationMs !== null;
    const blockIds = push
      ? null
      : flatBlockIds(requireField(kv, 'remote_block_ids', isBlockIds, 'an array of block ids'));
    // vllm-ascend v0.13 sends no remote_request_id: both sides use the same external id then.
    const remoteId = isString(kv.remote_request_id) ? kv.remote_request_id : run.internalId;
    const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    // vLLM starts the KV load only when the scheduler picks the request from its waiting queue
    // (a free running slot); meanwhile newest NIXL's decode keeps the prefill's lease alive.
    const beat =
      this.profile.heartbeat && HEARTBEAT_FIELDS.every((k) => kv[k] !== undefined && kv[k] !== null);
    const stopBeats = beat ? this.heartbeat(`${origin}/internal/kv/heartbeat`, remoteId) : null;
    try {
      await this.scheduler.whenFree(run.signal);
    } finally {
      stopBeats?.();
    }
    const url = `${origin}/internal/kv/pull`;
    // A push registration waits for the prefill's write up to push_registration_timeout; upstream then
    // only drops it with a warning, the simulator fails the request (a bounded wait, said in a 500).
    const waitMs = push
      ? (this.opts.pushRegistrationTimeoutMs ?? this.profile.pushRegistrationMs!)
      : this.opts.kvWaitMs;
    let r;
    try {
      r = await this.peers.postJson(
        url,
        {
          remote_request_id: remoteId,
          remote_engine_id: engineId,
          ...(blockIds ? { remote_block_ids: blockIds } : {}),
          requester_engine_id: this.opts.engineId,
        },
        waitMs,
        run.signal,
      );
    } catch (err) {
      if (run.signal.aborted) throw new AbortedError(String(run.signal.reason));
      if (push)
        throw new SimFailure(
          500,
          `KV push registration for request ${run.id} got no write from the prefill within ${waitMs} ms: ${(err as Error).message}`,
          'push_registration_timeout',
        );
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

  /** Heartbeats to the prefill every lease / 6 (this engine's own kv_lease_duration), now and on; returns stop. */
  private heartbeat(url: string, remoteId: string): () => void {
    const send = (): void => {
      this.peers
        .postJson(url, { remote_request_id: remoteId }, this.leaseMs, undefined)
        .catch((err: Error) => this.log.debug({ url, err: err.message }, 'kv heartbeat failed'));
    };
    send();
    const timer = setInterval(send, Math.max(1, Math.floor(this.leaseMs / 6)));
    timer.unref();
    return () => clearInterval(timer);
  }

  // ---- P/D: vLLM trigger (decode calls the metaserver, prefill pushes) -----------------------

  /**
   * Layer-wise decode: POSTs the metaserver body (fire and forget: the connector ignores the HTTP
   * status and retries only when the POST raises) and waits for the prefill's push. Upstream has no
   * decode-side bound (the request stays WAITING_FOR_REMOTE_KVS until KV arrives or the client goes;
   * VA LW get_finished, v0.18.0); the simulator gives up after `--kv-wait-ms` with a 500.
   */
  private async triggerKv(run: Run): Promise<KvPayload> {
    const { g, signal } = run;
    const metaserver = g.kv!.metaserver as string;
    const nBlocks = Math.ceil(g.promptIds.length / this.opts.blockSize);
    const blockIds = this.blocks.allocate(nBlocks);
    const localCached = this.cache.lookup(
      g.blockKeys ?? this.cache.blockHashes(g.promptIds),
      g.promptIds.length,
    );
    // v0.14.0rc1 sent vLLM's internal id (with suffix); other releases the external id.
    const requestId = this.profile.metaserverIdSuffix ? run.internalId : run.externalId;
    const wait = new AbortController();
    const timer = setTimeout(() => wait.abort('kv_wait_timeout'), this.opts.kvWaitMs);
    const onAbort = (): void => wait.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const pushed = this.inbox.expect(requestId, nBlocks, this.opts.kvWaitMs, wait.signal);
    pushed.catch(() => {});
    const body = metaserverBody(this.profile.metaserver ?? 'v0.17', {
      requestId,
      engineId: this.opts.engineId,
      host: this.advertised.host,
      port: this.advertised.port,
      blockIds,
      blockSize: this.opts.blockSize,
      cachedTokens: localCached,
    });
    const call = this.callMetaserver(metaserver, body, wait.signal);
    try {
      return await pushed;
    } catch (err) {
      if (signal.aborted) throw new AbortedError(String(signal.reason));
      void err;
      throw new SimFailure(
        500,
        `KV for request ${requestId} did not arrive within ${this.opts.kvWaitMs} ms (metaserver ${metaserver}: ${await call})`,
        'kv_push_timeout',
      );
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.inbox.cancel(requestId);
      this.blocks.free(nBlocks);
    }
  }

  /** `_access_metaserver`: up to 3 tries on connection errors, any HTTP answer ends it; resolves with what happened. */
  private async callMetaserver(url: string, body: unknown, signal: AbortSignal): Promise<string> {
    let last = '';
    for (let i = 1; i <= METASERVER_TRIES && !signal.aborted; i++) {
      try {
        const r = await this.peers.postJson(url, body, this.opts.kvWaitMs, signal);
        return `answered ${r.status}`;
      } catch (err) {
        last = (err as Error).message;
        this.log.warn({ url, try: i, err: last }, 'metaserver call failed');
      }
    }
    return `unreachable: ${last}`;
  }

  private async pushKv(run: Run, payload: KvPayload): Promise<void> {
    const kv = run.g.kv!;
    const host = requireField(kv, 'remote_host', isString, 'a host string');
    const port = requireField(kv, 'remote_port', isPort, 'a port number');
    const blockIds = flatBlockIds(requireField(kv, 'remote_block_ids', isBlockIds, 'an array of block ids'));
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
