import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { errorTypeForStatus } from '../common/http.js';
import { HttpError, renderError } from '../common/http-error.js';
import type { Logger } from '../common/logger.js';
import { resolveProfile, type EngineProfile } from './engine-profiles.js';
import { Faults } from './faults.js';
import { classifyFlow } from './flow.js';
import { BlockAllocator, type KvPayload } from './kv-handoff.js';
import { KvTransfer } from './kv-transfer.js';
import { Ledger, type LedgerEntry } from './ledger.js';
import { SimMetrics } from './metrics.js';
import type { SimOptions } from './options.js';
import { PrefixCache } from './prefix-cache.js';
import type { VllmPrompt } from './vllm-prompt.js';
import { writeGenerationError } from './generation-error.js';
import {
  checkContextLength,
  parseGenRequest,
  parseJsonPreservingRoom,
  RequestError,
  type GenRequest,
} from './request-body.js';
import { parseGenerateRequest } from './sglang-generate.js';
import { DiedError, ResponseWriter } from './response-writer.js';
import type { Run } from './run.js';
import { SimFailure } from './sim-failure.js';
import { endWithEvents, SSE_DONE, sseError } from './sse.js';
import { budgetConfigError, StepBudget } from './step-budget.js';
import { AbortedError, Scheduler, sleep, untilAborted } from './timing.js';
import { planChoice, type ChoiceOutput } from './answer.js';
import { choiceTokenIds } from './final-choice.js';
import { thinkingOn } from './reasoning.js';
import { promptContext, OUTPUT_VOCAB } from './tokens.js';

/** The simulated engine: scheduling, prefix cache, P/D flows and the OpenAI responses. */
export class SimCore {
  /** The engine release imitated (throws a one-line error for an unknown `--engine-version`). */
  readonly profile: EngineProfile;
  readonly cache: PrefixCache;
  readonly scheduler: Scheduler;
  /** Prefill compute: the per-step token budget shared by running requests. */
  readonly steps: StepBudget;
  readonly blocks: BlockAllocator;
  /** P/D KV transfer, both sides; holds the KV kept for peers. */
  readonly kv: KvTransfer;
  readonly ledger: Ledger;
  readonly faults: Faults;
  readonly metrics: SimMetrics;
  private readonly output: ResponseWriter;
  /** With `--tokenizer`: the model's tokenizer and vLLM's block hashes (set by startSimulator). */
  vllmPrompt: VllmPrompt | null = null;
  private readonly controls = new Map<LedgerEntry, AbortController>();

  constructor(
    readonly opts: SimOptions,
    private readonly log: Logger,
  ) {
    this.profile = resolveProfile(opts.engine, opts.engineVersion);
    const budgetError = budgetConfigError(opts);
    if (budgetError !== null) throw new Error(budgetError);
    this.cache = new PrefixCache(opts.blockSize, opts.kvBlocks);
    this.scheduler = new Scheduler(opts.maxNumSeqs);
    // Requests holding a batch slot and not prefilling are decoding (or held for a hang fault).
    this.steps = new StepBudget(opts, () => this.scheduler.running - this.steps.prefilling);
    this.blocks = new BlockAllocator(opts.kvBlocks);
    this.kv = new KvTransfer(opts, this.profile, this.scheduler, this.blocks, this.cache, log);
    this.ledger = new Ledger(opts.ledgerMax);
    this.faults = new Faults(opts.faults);
    this.metrics = new SimMetrics(
      opts.model,
      () => ({
        running: this.scheduler.running,
        waiting: this.scheduler.waiting + this.kv.waiting,
        kvUsage: Math.min(1, this.blocks.inUse / Math.max(1, opts.kvBlocks)),
      }),
      opts.engine,
    );
    this.output = new ResponseWriter(opts, this.scheduler, this.steps, this.metrics, {
      reasoningKeys: this.profile.reasoningKeys,
    });
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

  /** Serves one generation request; invalid input is thrown (`HttpError`) for the frame to render. */
  async handle(
    kind: GenRequest['kind'],
    path: string,
    req: IncomingMessage,
    res: ServerResponse,
    text: string,
  ) {
    const parsed = parseJsonPreservingRoom(text);
    if (!parsed.ok) throw new HttpError(400, parsed.message);
    const g =
      kind === 'generate'
        ? parseGenerateRequest(parsed.value, this.opts)
        : parseGenRequest(kind, parsed.value, this.opts);
    if (this.vllmPrompt !== null && kind !== 'generate')
      await this.vllmPrompt.apply(kind, parsed.value as Record<string, unknown>, g);
    checkContextLength(g, this.opts.maxModelLen);
    const flow = classifyFlow(g, this.opts.role, this.opts.engine);
    if (g.model !== this.opts.model) {
      throw new HttpError(404, `The model \`${g.model}\` does not exist.`, { param: 'model' });
    }
    const header = req.headers['x-request-id'];
    const headerId = typeof header === 'string' && header.length > 0 ? header : null;
    const id =
      (this.opts.engine === 'sglang' ? (g.bodyRequestId ?? headerId) : (headerId ?? g.bodyRequestId)) ??
      randomUUID();
    const prefillLeg = flow.endsWith('_prefill');
    const fault = this.faults.forRequest(path, g.kv !== null || g.bootstrap !== null, prefillLeg);
    const entry = this.ledger.start(id, path, flow);
    if (fault.errorStatus !== null) {
      this.ledger.finish(entry, 'failed', `fault:error_status_${fault.errorStatus}`);
      throw new HttpError(fault.errorStatus, `simulated fault: HTTP ${fault.errorStatus}`, {
        code: fault.errorStatus,
      });
    }
    if (fault.streamErrorFirst) {
      this.ledger.finish(entry, 'failed', 'fault:stream_error_first');
      return writeGenerationError(this.opts.engine, g, id, this.opts.model, res);
    }
    const ctl = new AbortController();
    this.controls.set(entry, ctl);
    let finished = false;
    res.once('close', () => {
      if (!finished) ctl.abort('client_disconnect');
    });
    const run: Run = {
      id,
      ...this.engineIds(kind, id),
      g,
      flow,
      entry,
      signal: ctl.signal,
      res,
      startedAt: performance.now(),
      committed: false,
      emitted: 0,
      dieAfter: fault.dieAfterTokens,
      recomputeAfter: fault.recomputeAfter,
      slowFactor: fault.slowFactor,
      hangMs: fault.hangMs,
      ignoreRemoteKv: fault.ignoreRemoteKv,
      dropKvParams: fault.dropKvParams,
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

  /**
   * vLLM's ids for a request whose base id is `id` (X-Request-Id, else body request_id, else random):
   * external `chatcmpl-<id>` / `cmpl-<id>-<prompt index>` (VL entrypoints/openai chat_completion/serving.py,
   * completion/serving.py), internal = external + `-<8 hex>` from vLLM 0.14 (VL v1/engine/input_processor.py
   * InputProcessor.assign_request_id). SGLang uses the id as it is.
   */
  private engineIds(kind: GenRequest['kind'], id: string): { externalId: string; internalId: string } {
    if (this.opts.engine === 'sglang') return { externalId: id, internalId: id };
    const externalId = kind === 'chat' ? `chatcmpl-${id}` : `cmpl-${id}-0`;
    const suffix = this.profile.internalIdSuffix ? `-${randomBytes(4).toString('hex')}` : '';
    return { externalId, internalId: externalId + suffix };
  }

  /**
   * The RecomputeScheduler fault (`recompute_after`, vllm-ascend decode only: it acts only on a KV
   * consumer, VA core/recompute_scheduler.py): output cut after N tokens, finish "stop", stop_reason
   * "recomputed"; v0.13/v0.14 repeat the last token in that frame, v0.15+ carry none. Applied to a
   * plain-text single choice (tool calls, JSON and `n > 1` are not cut).
   */
  private ending(c: ChoiceOutput, recomputeAfter: number): ChoiceOutput {
    const mode = this.opts.role === 'decode' ? this.profile.recompute : null;
    const plain = c.tool === null && c.json === null;
    if (mode === null || !plain || recomputeAfter < 0 || recomputeAfter >= c.words.length) return c;
    let words = c.words.subarray(0, recomputeAfter);
    const repeat = mode === 'repeat-last-token' && recomputeAfter > 0;
    if (repeat) {
      words = new Uint16Array(recomputeAfter + 1);
      words.set(c.words.subarray(0, recomputeAfter));
      words[recomputeAfter] = c.words[recomputeAfter - 1]!;
    }
    return {
      ...c,
      words,
      reasoning: Math.min(c.reasoning, words.length),
      end: { finish: 'stop', stopReason: 'recomputed', tokenless: !repeat },
    };
  }

  /** The choices of a run's answer (answer.ts); a bootstrap prefill computes one token. */
  private plan(run: Run): ChoiceOutput[] {
    const { g, flow } = run;
    const bootstrapPrefill = flow === 'bootstrap_prefill';
    const gen = bootstrapPrefill ? { ...g, naturalStop: false } : g;
    const context = promptContext(g.promptText, g.promptIds);
    const settings = {
      eosAt: this.opts.eosAt,
      thinking: thinkingOn(this.opts.reasoningParser, g),
      idStyle: this.opts.engine === 'sglang' ? ('sglang' as const) : ('vllm' as const),
    };
    const maxTokens = bootstrapPrefill ? 1 : g.maxTokens;
    const choices = [];
    for (let k = 0; k < g.n; k++) choices.push(planChoice(gen, k, context, maxTokens, settings));
    if (g.n === 1) choices[0] = this.ending(choices[0]!, run.recomputeAfter);
    return choices;
  }

  private onRunError(run: Run, err: unknown): void {
    const { res, entry } = run;
    if (err instanceof AbortedError || run.signal.aborted) {
      const reason = String(run.signal.reason ?? (err as AbortedError).reason ?? 'aborted');
      this.ledger.finish(entry, 'aborted', reason);
      if (reason === 'abort_request' && !res.destroyed) this.output.finishAborted(run);
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
      endWithEvents(res, sseError(message, errorTypeForStatus(status), status), SSE_DONE);
    } else {
      renderError(res, new HttpError(status, message));
    }
  }

  private async execute(run: Run): Promise<void> {
    const { g, flow, entry, signal } = run;
    const promptLen = g.promptIds.length;
    // 1. Remote KV first (vLLM WAITING_FOR_REMOTE_KVS): the request holds no batch slot meanwhile.
    let remote: KvPayload | null = null;
    if (flow === 'handoff_decode' || flow === 'trigger_decode' || flow === 'bootstrap_decode') {
      remote = await this.kv.receive(run);
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
      const hashes = g.blockKeys ?? this.cache.blockHashes(g.promptIds);
      const localHit = this.cache.lookup(hashes, promptLen);
      this.metrics.prefixQueries.inc(promptLen);
      if (localHit > 0) this.metrics.prefixHits.inc(localHit);
      this.metrics.promptTokens.inc(promptLen);
      const cached =
        remote && !run.ignoreRemoteKv ? Math.max(localHit, Math.min(remote.num_tokens, promptLen)) : localHit;
      await this.steps.prefill(promptLen - cached, signal);
      this.cache.insert(hashes, g.promptIds);
      if (run.hangMs !== 0) {
        if (run.hangMs < 0) await untilAborted(signal);
        else await sleep(run.hangMs, signal);
      }

      const choices = this.plan(run);

      if (flow === 'trigger_prefill' || flow === 'bootstrap_prefill') {
        // The first token comes out of prefill; then the KV goes to the decode outside the batch.
        const payload = this.kv.prefillPayload(g);
        releaseSlot();
        entry.state = 'transfer';
        await this.kv.send(run, payload);
        // The layer-wise connector's request_finished always returns (False, None) (VA LW).
        return await this.output.respond(run, choices, cached, null);
      }

      entry.state = 'decode';
      await this.output.respondWhileDecoding(run, choices, cached, () =>
        flow === 'handoff_prefill'
          ? withoutKeys(this.kv.holdForPull(run, lastTokenId(choices[0]!), choices[0]!.end), run.dropKvParams)
          : null,
      );
    } finally {
      releaseSlot();
    }
  }
}

/** The handoff params less the keys a `drop_kv_params` fault names. */
function withoutKeys(
  params: Record<string, unknown> | null,
  keys: readonly string[],
): Record<string, unknown> | null {
  if (params === null || keys.length === 0) return params;
  const out = { ...params };
  for (const k of keys) delete out[k];
  return out;
}

/** The id of a choice's last output token (0: none), as a prefill's handoff params name it. */
function lastTokenId(c: ChoiceOutput): number {
  const ids = choiceTokenIds(c);
  return ids.length > 0 ? ids[ids.length - 1]! : 0;
}

export { OUTPUT_VOCAB, SimFailure };
