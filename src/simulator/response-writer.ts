import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import type { SimMetrics } from './metrics.js';
import type { SimOptions } from './options.js';
import type { Run } from './run.js';
import { GenerateChunkWriter, generateFinalBody } from './sglang-generate.js';
import { ChunkWriter, makeUsage, SSE_DONE, type Ending } from './sse.js';
import type { StepBudget } from './step-budget.js';
import { AbortedError, Pacer, sleep, yieldToLoop, type Scheduler } from './timing.js';
import { outputText, outputTokenIds } from './tokens.js';

/** How the output ends; `tokenless`: the finish goes in a frame of its own, after the last token. */
export interface OutputEnd extends Ending {
  tokenless: boolean;
}

const ABORTED: Ending = { finish: 'abort', stopReason: null };

/** The die-after-N-tokens fault fired: the connection is cut, no error is rendered. */
export class DiedError extends Error {
  constructor() {
    super('simulated fault: died after N tokens');
  }
}

/**
 * Writes the OpenAI response of a run: the SSE stream paced by the decode timing model, or the
 * whole JSON body, in the engine's dialect (response ids, kv_transfer_params).
 */
export class ResponseWriter {
  constructor(
    private readonly opts: SimOptions,
    private readonly scheduler: Scheduler,
    private readonly steps: StepBudget,
    private readonly metrics: SimMetrics,
  ) {}

  /** `/abort_request` (SGLang): finish with finish_reason "abort" like SGLang does. */
  finishAborted(run: Run): void {
    const { res, g } = run;
    if (run.committed) {
      const w = this.writer(run);
      res.end(w.finishOnly(ABORTED) + SSE_DONE);
    } else if (!g.stream) {
      this.sendFinal(run, new Uint16Array(0), ABORTED, 0, null);
    } else {
      this.commit(run);
      const w = this.writer(run);
      res.end(w.first(null) + w.finishOnly(ABORTED) + SSE_DONE);
    }
  }

  private writer(run: Run, cached = 0): Pick<ChunkWriter, 'first' | 'token' | 'finishOnly' | 'usage'> {
    const id = this.responseId(run);
    if (run.g.kind === 'generate') return new GenerateChunkWriter(id, run.g.promptIds.length, cached);
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
  async respond(
    run: Run,
    words: Uint16Array,
    end: OutputEnd,
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    await this.respondWhileDecoding(run, words, end, cached, () => kvParams);
  }

  /**
   * Emits `words` one decode step at a time (paced by the timing model, or back-to-back at
   * time-scale 0), then the final chunk/usage or the whole JSON body. `finalKv` runs once the last
   * token is produced and returns the response's kv_transfer_params.
   */
  async respondWhileDecoding(
    run: Run,
    words: Uint16Array,
    end: OutputEnd,
    cached: number,
    finalKv: () => Record<string, unknown> | null,
  ): Promise<void> {
    const { g, res, signal, entry } = run;
    const n = words.length;
    const stream = g.stream;
    const w = stream ? this.writer(run, cached) : null;
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
        const wait = pacer.advance(this.steps.decodeStepMs(this.scheduler.running, run.slowFactor));
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
      if (w) buf += w.token(words[i]!, i === n - 1 && !end.tokenless ? end : null);
    }
    if (n === run.dieAfter) await dieAfterFlush(res, buf, stream);
    this.metrics.generationTokens.inc(n);
    this.metrics.e2e.observe((performance.now() - run.startedAt) / 1000);
    const kvParams = finalKv();
    if (w) {
      if (n === 0 || end.tokenless) buf += w.finishOnly(end);
      if (g.includeUsage) buf += w.usage(makeUsage(g.promptIds.length, n, cached));
      res.end(buf + SSE_DONE);
    } else {
      this.sendFinal(run, words, end, cached, kvParams);
    }
  }

  private sendFinal(
    run: Run,
    words: Uint16Array,
    end: Ending,
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    const { g } = run;
    const text = outputText(words);
    const usage = makeUsage(g.promptIds.length, words.length, cached);
    if (g.kind === 'generate') {
      const body = generateFinalBody(run.id, text, outputTokenIds(words), end.finish, usage);
      return sendJson(run.res, 200, body, { 'x-request-id': run.id });
    }
    const created = Math.floor(Date.now() / 1000);
    const choice: Record<string, unknown> =
      g.kind === 'chat'
        ? {
            index: 0,
            message: { role: 'assistant', content: text },
            logprobs: null,
            finish_reason: end.finish,
            stop_reason: end.stopReason,
          }
        : { index: 0, text, logprobs: null, finish_reason: end.finish, stop_reason: end.stopReason };
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
    if (this.opts.engine !== 'sglang') body.kv_transfer_params = kvParams;
    sendJson(run.res, 200, body, { 'x-request-id': run.id });
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
