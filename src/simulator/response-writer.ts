import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import type { SimMetrics } from './metrics.js';
import type { SimOptions } from './options.js';
import type { Run } from './run.js';
import { choiceSteps, choiceTokens, type ChoiceOutput } from './answer.js';
import { ChunkWriter, type ChatStyle } from './chunk-writer.js';
import { echoText, finalChoice } from './final-choice.js';
import { GenerateChunkWriter, generateFinalBody } from './sglang-generate.js';
import { endWithEvents, makeUsage, SSE_DONE, writeEvent, type Ending } from './sse.js';
import type { StepBudget } from './step-budget.js';
import { AbortedError, Pacer, sleep, yieldToLoop, type Scheduler } from './timing.js';
import { outputText, outputTokenIds } from './tokens.js';

/** How the output ends; `tokenless`: the finish goes in a frame of its own, after the last token. */
export interface OutputEnd extends Ending {
  tokenless: boolean;
}

const ABORTED: Ending = { finish: 'abort', stopReason: null };

/** What streams a run's events: OpenAI chunks (chunk-writer.ts) or SGLang `/generate` events. */
type EventWriter = Pick<ChunkWriter, 'first' | 'step' | 'finishOnly' | 'usage'>;

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
    private readonly style: ChatStyle,
  ) {}

  /** `/abort_request` (SGLang): finish with finish_reason "abort" like SGLang does. */
  finishAborted(run: Run): void {
    const { res, g } = run;
    if (run.committed) {
      const w = this.writer(run);
      endWithEvents(res, w.finishOnly(ABORTED), SSE_DONE);
    } else if (!g.stream) {
      this.sendFinal(run, [abortedChoice()], 0, null);
    } else {
      this.commit(run);
      const w = this.writer(run);
      endWithEvents(res, w.first(null), w.finishOnly(ABORTED), SSE_DONE);
    }
  }

  private writer(run: Run, cached = 0): EventWriter {
    const id = this.responseId(run);
    const { g } = run;
    if (g.kind === 'generate') return new GenerateChunkWriter(id, g.promptIds.length, cached);
    return new ChunkWriter(
      g.kind,
      id,
      Math.floor(Date.now() / 1000),
      this.opts.model,
      g.returnTokenIds,
      this.style,
      g.logprobs,
      g.echo ? echoText(g) : null,
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
    choices: readonly ChoiceOutput[],
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    await this.respondWhileDecoding(run, choices, cached, () => kvParams);
  }

  /**
   * Emits the choices one decode step at a time (paced by the timing model, or back-to-back at
   * time-scale 0), each step of each choice its own SSE event and socket write, then the final
   * chunks/usage or the whole JSON body. `finalKv` runs once the last token is produced and returns
   * the response's kv_transfer_params.
   */
  async respondWhileDecoding(
    run: Run,
    choices: readonly ChoiceOutput[],
    cached: number,
    finalKv: () => Record<string, unknown> | null,
  ): Promise<void> {
    const { g, res, signal, entry } = run;
    const steps = choices.map(choiceSteps);
    const n = Math.max(0, ...steps);
    const stream = g.stream;
    const w = stream ? this.writer(run, cached) : null;
    if (w) {
      this.commit(run);
      for (const c of choices)
        if (!writeEvent(res, w.first(g.returnTokenIds ? g.promptIds : null, c.index)))
          await drained(res, signal);
    }
    const pacer = new Pacer();
    let last = performance.now();
    const itl = this.metrics.itl;
    for (let i = 0; i < n; i++) {
      if (i > 0) {
        const wait = pacer.advance(this.steps.decodeStepMs(this.scheduler.running, run.slowFactor));
        if (wait > 0) await sleep(wait, signal);
        else if ((i & 63) === 0) await yieldToLoop();
        if (signal.aborted) throw new AbortedError(String(signal.reason));
      }
      if (i === run.dieAfter) await dieAfterFlush(res, stream);
      const now = performance.now();
      if (i === 0) this.metrics.ttft.observe((now - run.startedAt) / 1000);
      else itl.observe((now - last) / 1000);
      last = now;
      run.emitted = i + 1;
      entry.output_tokens = i + 1;
      if (w) {
        for (let k = 0; k < choices.length; k++) {
          const c = choices[k]!;
          if (i >= steps[k]!) continue;
          if (!writeEvent(res, w.step(c, i, i === steps[k]! - 1 && !c.end.tokenless ? c.end : null)))
            await drained(res, signal);
        }
      }
    }
    if (n === run.dieAfter) await dieAfterFlush(res, stream);
    const completion = choices.reduce((sum, c) => sum + choiceTokens(c), 0);
    this.metrics.generationTokens.inc(completion);
    this.metrics.e2e.observe((performance.now() - run.startedAt) / 1000);
    const kvParams = finalKv();
    if (w) {
      for (let k = 0; k < choices.length; k++) {
        const c = choices[k]!;
        if (steps[k] === 0 || c.end.tokenless)
          if (!writeEvent(res, w.finishOnly(c.end, c.index))) await drained(res, signal);
      }
      if (g.includeUsage)
        if (!writeEvent(res, w.usage(makeUsage(g.promptIds.length, completion, cached))))
          await drained(res, signal);
      endWithEvents(res, SSE_DONE);
    } else {
      this.sendFinal(run, choices, cached, kvParams);
    }
  }

  private sendFinal(
    run: Run,
    choices: readonly ChoiceOutput[],
    cached: number,
    kvParams: Record<string, unknown> | null,
  ) {
    const { g } = run;
    const completion = choices.reduce((sum, c) => sum + choiceTokens(c), 0);
    const usage = makeUsage(g.promptIds.length, completion, cached);
    if (g.kind === 'generate') {
      const c = choices[0]!;
      const body = generateFinalBody(
        run.id,
        outputText(c.words),
        outputTokenIds(c.words),
        c.end.finish,
        usage,
      );
      return sendJson(run.res, 200, body, { 'x-request-id': run.id });
    }
    const body: Record<string, unknown> = {
      id: this.responseId(run),
      object: g.kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: this.opts.model,
      choices: choices.map((c) =>
        finalChoice(g, c, { style: this.style, sglang: this.opts.engine === 'sglang' }),
      ),
      usage,
    };
    if (g.returnTokenIds && g.kind === 'chat') body.prompt_token_ids = g.promptIds;
    if (this.opts.engine !== 'sglang') body.kv_transfer_params = kvParams;
    sendJson(run.res, 200, body, { 'x-request-id': run.id });
  }
}

/** The choice of an answer aborted before any token. */
function abortedChoice(): ChoiceOutput {
  return {
    index: 0,
    seed: 0,
    words: new Uint16Array(0),
    reasoning: 0,
    json: null,
    tool: null,
    end: { ...ABORTED, tokenless: false },
  };
}

/**
 * Die-after-N fault: wait until what the client should have seen left the socket, then throw
 * DiedError (the caller destroys the socket). Checking the socket's own buffer is not enough: Node 24
 * corks the response itself on a write and holds the tick's chunks in the response until it is
 * uncorked (Node 20 and 22 cork the socket instead), and destroying the response drops them, headers
 * included. So the response is uncorked fully, then an empty write goes behind everything written:
 * its callback runs once the socket has handed all of it to the kernel. A destroyed socket never
 * calls it back, hence 'close' too.
 */
async function dieAfterFlush(res: ServerResponse, stream: boolean): Promise<never> {
  if (stream && !res.destroyed) {
    while (res.writableCorked > 0) res.uncork();
    await new Promise<void>((resolve) => {
      res.once('close', resolve);
      res.write('', () => {
        res.off('close', resolve);
        resolve();
      });
    });
  }
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
