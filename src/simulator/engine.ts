import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { errorTypeForStatus, sendError, sendJson } from '../common/http.js';
import type { Logger } from '../common/logger.js';
import { BootstrapRooms } from './bootstrap.js';
import { Faults } from './faults.js';
import { classifyFlow, isIntArray, isPort, isString, requireField, type Flow } from './flow.js';
import { BlockAllocator, HeldKv, PushInbox, promptHash, type KvPayload } from './kv-handoff.js';
import { Ledger, type LedgerEntry } from './ledger.js';
import { SimMetrics } from './metrics.js';
import type { SimOptions } from './options.js';
import { PeerClient, errorMessageOf } from './peer-client.js';
import { PrefixCache } from './prefix-cache.js';
import { parseGenRequest, parseJsonPreservingRoom, RequestError, type GenRequest } from './request-body.js';
import { ChunkWriter, makeUsage, SSE_DONE, sseError } from './sse.js';
import {
  AbortedError,
  decodeStepMs,
  Pacer,
  prefillMs,
  Scheduler,
  sleep,
  transferMs,
  untilAborted,
  yieldToLoop,
  type TimingParams,
} from './timing.js';
import { hashString, outputText, outputTokenIds, planOutput, OUTPUT_VOCAB } from './tokens.js';

/** A failure of the simulated engine (not of the input): rendered as an HTTP error or an SSE error frame. */
export class SimFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason: string,
  ) {
    super(message);
  }
}

interface Run {
  id: string;
  g: GenRequest;
  flow: Flow;
  entry: LedgerEntry;
  signal: AbortSignal;
  res: ServerResponse;
  startedAt: number;
  /** SSE headers sent (the stream is committed). */
  committed: boolean;
  emitted: number;
  dieAfter: number;
  slowFactor: number;
  hangMs: number;
}

/** The simulated engine: scheduling, prefix cache, P/D flows and the OpenAI responses. */
export class SimCore {
  readonly cache: PrefixCache;
  readonly scheduler: Scheduler;
  readonly blocks: BlockAllocator;
  readonly held: HeldKv;
  readonly inbox = new PushInbox();
  readonly rooms = new BootstrapRooms();
  readonly ledger: Ledger;
  readonly faults: Faults;
  readonly metrics: SimMetrics;
  readonly peers = new PeerClient();
  private readonly timing: TimingParams;
  private readonly controls = new Map<LedgerEntry, AbortController>();
  private waitingKv = 0;
  /** Set once listening: host/port advertised in kv_transfer_params. */
  advertised = { host: '127.0.0.1', port: 0 };

  constructor(
    readonly opts: SimOptions,
    private readonly log: Logger,
  ) {
    this.cache = new PrefixCache(opts.blockSize, opts.kvBlocks);
    this.scheduler = new Scheduler(opts.maxNumSeqs);
    this.blocks = new BlockAllocator(opts.kvBlocks);
    this.held = new HeldKv(this.blocks, (id) => this.log.info({ request_id: id }, 'kv lease expired'));
    this.ledger = new Ledger(opts.ledgerMax);
    this.faults = new Faults(opts.faults);
    this.timing = opts;
    this.metrics = new SimMetrics(opts.model, () => ({
      running: this.scheduler.running,
      waiting: this.scheduler.waiting + this.waitingKv,
      kvUsage: Math.min(1, this.blocks.inUse / Math.max(1, opts.kvBlocks)),
    }));
  }

  kvHeld() {
    return [...this.held.list(), ...this.rooms.list(), ...this.inbox.list()];
  }

  /** SGLang `/abort_request`: aborts in-flight requests with this id; returns how many. */
  abortById(id: string, reason: string): number {
    let n = 0;
    for (const e of this.ledger.findInFlight(id)) {
      const c = this.controls.get(e);
      if (c && !c.signal.aborted) {
        c.abort(reason);
        n++;
      }
    }
    return n;
  }

  abortAll(reason: string): void {
    for (const c of this.controls.values()) c.abort(reason);
  }

  async handle(
    kind: 'chat' | 'completion',
    path: string,
    req: IncomingMessage,
    res: ServerResponse,
    text: string,
  ) {
    const parsed = parseJsonPreservingRoom(text);
    if (!parsed.ok) return sendError(res, 400, parsed.message);
    let g: GenRequest;
    let flow: Flow;
    try {
      g = parseGenRequest(kind, parsed.value, this.opts);
      flow = classifyFlow(g, this.opts.role, this.opts.engine);
    } catch (err) {
      if (err instanceof RequestError) return sendError(res, err.status, err.message, undefined, err.param);
      throw err;
    }
    if (g.model !== this.opts.model) {
      return sendError(res, 404, `The model \`${g.model}\` does not exist.`, undefined, 'model');
    }
    const header = req.headers['x-request-id'];
    const headerId = typeof header === 'string' && header.length > 0 ? header : null;
    const id =
      (this.opts.engine === 'sglang' ? (g.bodyRequestId ?? headerId) : (headerId ?? g.bodyRequestId)) ??
      randomUUID();
    const fault = this.faults.forRequest(path, g.kv !== null || g.bootstrap !== null);
    const entry = this.ledger.start(id, path, flow);
    if (fault.errorStatus !== null) {
      this.ledger.finish(entry, 'failed', `fault:error_status_${fault.errorStatus}`);
      return sendError(
        res,
        fault.errorStatus,
        `simulated fault: HTTP ${fault.errorStatus}`,
        undefined,
        null,
        fault.errorStatus,
      );
    }
    const ctl = new AbortController();
    this.controls.set(entry, ctl);
    let finished = false;
    res.once('close', () => {
      if (!finished) ctl.abort('client_disconnect');
    });
    const run: Run = {
      id,
      g,
      flow,
      entry,
      signal: ctl.signal,
      res,
      startedAt: performance.now(),
      committed: false,
      emitted: 0,
      dieAfter: fault.dieAfterTokens,
      slowFactor: fault.slowFactor,
      hangMs: fault.hangMs,
    };
    try {
      await this.execute(run);
      this.ledger.finish(entry, 'completed', null);
    } catch (err) {
      this.onRunError(run, err);
    } finally {
      finished = true;
      this.controls.delete(entry);
      this.ledger.finish(entry, 'failed', 'internal'); // no-op when already finished
    }
  }

  private onRunError(run: Run, err: unknown): void {
    const { res, entry } = run;
    if (err instanceof AbortedError || run.signal.aborted) {
      const reason = String(run.signal.reason ?? (err as AbortedError).reason ?? 'aborted');
      this.ledger.finish(entry, 'aborted', reason);
      if (reason === 'abort_request' && !res.destroyed) this.finishAborted(run);
      return;
    }
    if (err instanceof DiedError) {
      this.ledger.finish(entry, 'failed', 'fault:die_after_tokens');
      res.socket?.destroy();
      res.destroy();
      return;
    }
    const known = err instanceof SimFailure || err instanceof RequestError;
    const status = known ? err.status : 500;
    const message = err instanceof Error ? err.message : String(err);
    const reason =
      err instanceof SimFailure ? err.reason : err instanceof RequestError ? 'bad_request' : 'internal_error';
    if (!known) this.log.error({ err, request_id: run.id }, 'simulator request failed');
    this.ledger.finish(entry, 'failed', reason);
    if (res.destroyed) return;
    if (run.committed) {
      res.end(sseError(message, errorTypeForStatus(status), status) + SSE_DONE);
    } else {
      sendError(res, status, message);
    }
  }

  /** `/abort_request` (SGLang): finish with finish_reason "abort" like SGLang does. */
  private finishAborted(run: Run): void {
    const { res, g } = run;
    if (run.committed) {
      const w = this.writer(run);
      res.end(w.finishOnly('abort') + SSE_DONE);
    } else if (!g.stream) {
      this.sendFinal(run, new Uint16Array(0), 'abort', 0, null);
    } else {
      this.commit(run);
      const w = this.writer(run);
      res.end(w.first(null) + w.finishOnly('abort') + SSE_DONE);
    }
  }

  private async execute(run: Run): Promise<void> {
    const { g, flow, entry, signal } = run;
    const promptLen = g.promptIds.length;
    // 1. Remote KV first (vLLM WAITING_FOR_REMOTE_KVS): the request holds no batch slot meanwhile.
    let remote: KvPayload | null = null;
    if (flow === 'handoff_decode' || flow === 'trigger_decode' || flow === 'bootstrap_decode') {
      entry.state = 'waiting_kv';
      this.waitingKv++;
      try {
        remote =
          flow === 'handoff_decode'
            ? await this.pullKv(run)
            : flow === 'trigger_decode'
              ? await this.triggerKv(run)
              : await this.joinBootstrap(run);
      } finally {
        this.waitingKv--;
      }
      if (remote.prompt_hash !== promptHash(g.promptIds) || remote.num_tokens !== promptLen) {
        throw new SimFailure(
          500,
          `KV transfer mismatch for request ${run.id}: the prefill computed a different prompt (${remote.num_tokens} tokens) than this decode received (${promptLen} tokens)`,
          'kv_mismatch',
        );
      }
      await this.delay(transferMs(this.timing, remote.block_ids.length), signal);
    }

    // 2. Admission: max-num-seqs slots, FIFO queue.
    entry.state = 'queued';
    await this.scheduler.acquire(signal);
    let slot = true;
    const runningBlocks = Math.ceil((promptLen + g.maxTokens) / this.opts.blockSize);
    this.blocks.inUse += runningBlocks;
    const releaseSlot = (): void => {
      if (!slot) return;
      slot = false;
      this.scheduler.release();
      this.blocks.free(runningBlocks);
    };
    try {
      entry.state = 'prefill';
      // 3. Prefill: local prefix cache, remote KV counts as cached.
      const hashes = this.cache.blockHashes(g.promptIds);
      const localHit = this.cache.lookup(hashes, promptLen);
      this.metrics.prefixQueries.inc(promptLen);
      if (localHit > 0) this.metrics.prefixHits.inc(localHit);
      this.metrics.promptTokens.inc(promptLen);
      const cached = remote ? Math.max(localHit, Math.min(remote.num_tokens, promptLen)) : localHit;
      await this.delay(prefillMs(this.timing, promptLen - cached), signal);
      this.cache.insert(hashes);
      if (run.hangMs !== 0) {
        if (run.hangMs < 0) await untilAborted(signal);
        else await sleep(run.hangMs, signal);
      }

      const maxTokens = flow === 'bootstrap_prefill' ? 1 : g.maxTokens;
      const plan = planOutput(
        g.seed ?? (g.promptText !== null ? hashString(g.promptText) : promptHash(g.promptIds)),
        maxTokens,
        g.stop,
        g.minTokens,
        g.naturalStop && flow !== 'bootstrap_prefill',
      );

      if (flow === 'trigger_prefill' || flow === 'bootstrap_prefill') {
        // The first token comes out of prefill; then the KV goes to the decode outside the batch.
        const payload = this.payload(g, Math.ceil(promptLen / this.opts.blockSize));
        releaseSlot();
        entry.state = 'transfer';
        if (flow === 'trigger_prefill') await this.pushKv(run, payload);
        else {
          try {
            await this.rooms.offer(g.bootstrap!.room, run.id, payload, this.opts.bootstrapTimeoutMs, signal);
          } catch (err) {
            if (err instanceof AbortedError) throw err;
            throw new SimFailure(500, (err as Error).message, 'bootstrap_timeout');
          }
        }
        return await this.respond(run, plan.words, plan.finishReason, cached, null);
      }

      entry.state = 'decode';
      await this.respondWhileDecoding(run, plan.words, plan.finishReason, cached, () => {
        if (flow !== 'handoff_prefill') return null;
        const nBlocks = Math.ceil(promptLen / this.opts.blockSize);
        const payload = this.payload(g, nBlocks);
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
      });
    } finally {
      releaseSlot();
    }
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

  private delay(ms: number, signal: AbortSignal): Promise<void> | void {
    if (ms > 0) return sleep(ms, signal);
    if (signal.aborted) throw new AbortedError(String(signal.reason));
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
    await this.delay(transferMs(this.timing, blockIds.length), run.signal);
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
    const url = `http://${b.host.includes(':') ? `[${b.host}]` : b.host}:${b.port}/internal/bootstrap/join`;
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
        `bootstrap ${b.host}:${b.port} unreachable for room ${b.room}: ${(err as Error).message}`,
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

  // ---- output -----------------------------------------------------------------------------------

  private writer(run: Run): ChunkWriter {
    const id = this.responseId(run);
    return new ChunkWriter(
      run.g.kind,
      id,
      Math.floor(Date.now() / 1000),
      this.opts.model,
      run.g.returnTokenIds,
    );
  }

  private responseId(run: Run): string {
    if (this.opts.engine === 'sglang') return run.id;
    return (run.g.kind === 'chat' ? 'chatcmpl-' : 'cmpl-') + run.id;
  }

  private commit(run: Run): void {
    run.committed = true;
    run.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-request-id': run.id,
    });
  }

  /** Non-streaming or prefill-style response without a decode loop (used by trigger/bootstrap prefill). */
  private async respond(
    run: Run,
    words: Uint16Array,
    finish: string,
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    await this.respondWhileDecoding(run, words, finish, cached, () => kvParams);
  }

  /**
   * Emits `words` one decode step at a time (paced by the timing model, or back-to-back at
   * time-scale 0), then the final chunk/usage or the whole JSON body. `finalKv` runs once the last
   * token is produced and returns the response's kv_transfer_params.
   */
  private async respondWhileDecoding(
    run: Run,
    words: Uint16Array,
    finish: string,
    cached: number,
    finalKv: () => Record<string, unknown> | null,
  ): Promise<void> {
    const { g, res, signal, entry } = run;
    const n = words.length;
    const stream = g.stream;
    const w = stream ? this.writer(run) : null;
    let buf = '';
    if (w) {
      this.commit(run);
      buf = w.first(g.returnTokenIds ? g.promptIds : null);
    }
    const pacer = new Pacer();
    let last = performance.now();
    const itl = this.metrics.itl;
    for (let i = 0; i < n; i++) {
      if (i > 0) {
        const wait = pacer.advance(decodeStepMs(this.timing, this.scheduler.running, run.slowFactor));
        if (wait > 0 || (i & 63) === 0) {
          if (buf.length > 0) {
            if (!res.write(buf)) await drained(res, signal);
            buf = '';
          }
          if (wait > 0) await sleep(wait, signal);
          else await yieldToLoop();
        }
        if (signal.aborted) throw new AbortedError(String(signal.reason));
      }
      if (i === run.dieAfter) await dieAfterFlush(res, buf, stream);
      const now = performance.now();
      if (i === 0) this.metrics.ttft.observe((now - run.startedAt) / 1000);
      else itl.observe((now - last) / 1000);
      last = now;
      run.emitted = i + 1;
      entry.output_tokens = i + 1;
      if (w) buf += w.token(words[i]!, i === n - 1 ? finish : null);
    }
    if (n === run.dieAfter) await dieAfterFlush(res, buf, stream);
    this.metrics.generationTokens.inc(n);
    this.metrics.e2e.observe((performance.now() - run.startedAt) / 1000);
    const kvParams = finalKv();
    if (w) {
      if (n === 0) buf += w.finishOnly(finish);
      if (g.includeUsage) buf += w.usage(makeUsage(g.promptIds.length, n, cached));
      res.end(buf + SSE_DONE);
    } else {
      this.sendFinal(run, words, finish, cached, kvParams);
    }
  }

  private sendFinal(
    run: Run,
    words: Uint16Array,
    finish: string,
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    const { g } = run;
    const text = outputText(words);
    const usage = makeUsage(g.promptIds.length, words.length, cached);
    const created = Math.floor(Date.now() / 1000);
    const choice: Record<string, unknown> =
      g.kind === 'chat'
        ? {
            index: 0,
            message: { role: 'assistant', content: text },
            logprobs: null,
            finish_reason: finish,
            stop_reason: null,
          }
        : { index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null };
    if (g.returnTokenIds) {
      choice.token_ids = outputTokenIds(words);
      if (g.kind === 'completion') choice.prompt_token_ids = g.promptIds;
    }
    const body: Record<string, unknown> = {
      id: this.responseId(run),
      object: g.kind === 'chat' ? 'chat.completion' : 'text_completion',
      created,
      model: this.opts.model,
      choices: [choice],
      usage,
    };
    if (g.returnTokenIds && g.kind === 'chat') body.prompt_token_ids = g.promptIds;
    if (this.opts.engine === 'vllm') body.kv_transfer_params = kvParams;
    sendJson(run.res, 200, body, { 'x-request-id': run.id });
  }
}

class DiedError extends Error {
  constructor() {
    super('simulated fault: died after N tokens');
  }
}

/** Die-after-N fault: flush what the client should have seen (stream), then throw DiedError. */
async function dieAfterFlush(res: ServerResponse, buf: string, stream: boolean): Promise<never> {
  if (stream) await new Promise<void>((resolve) => res.write(buf, () => resolve()));
  throw new DiedError();
}

function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      if (signal.aborted) reject(new AbortedError(String(signal.reason)));
      else resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

export { OUTPUT_VOCAB };
