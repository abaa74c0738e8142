/**
 * A deterministic multi-turn trace in the Mooncake FAST'25 format (src/loadgen/mooncake-trace.ts)
 * for the precise-routing benchmark (scripts/bench/precise-e2e.ts): `sessions` conversations of
 * `turns` turns each. Every prompt starts with one block shared by all sessions (id 0, a system
 * prompt); turn t of a session repeats the ids of its turn t−1 (its history, whose partial last block
 * is now whole) and appends 1–2 new ones (the previous answer and the new user message), the last
 * one partial. Turns advance round-robin
 * over the sessions, `gapMs` apart, so a session's next turn arrives `sessions × gapMs` after its last.
 * A function of its options only (seeded PRNG): every run and every policy replays the same trace.
 *
 *   npx tsx scripts/bench/precise-trace.ts --sessions 12 --turns 4 > trace.jsonl
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { MOONCAKE_BLOCK_TOKENS, type TraceRecord } from '../../src/loadgen/mooncake-trace.js';
import { Prng, deriveSeed } from '../../src/loadgen/prng.js';

export interface MultiTurnTraceOptions {
  sessions: number;
  turns: number;
  /** Gap between consecutive arrivals (ms, before `--time-scale`). */
  gapMs: number;
  seed: number;
  /** Output tokens per request. */
  outputLength: number;
}

export function multiTurnTrace(opts: MultiTurnTraceOptions): TraceRecord[] {
  let nextId = 1; // 0: the shared system block
  const histories: number[][] = Array.from({ length: opts.sessions }, () => [0]);
  const out: TraceRecord[] = [];
  for (let turn = 0; turn < opts.turns; turn++) {
    for (let s = 0; s < opts.sessions; s++) {
      const rng = new Prng(deriveSeed(opts.seed >>> 0, 17, s, turn));
      const ids = histories[s]!;
      const added = turn === 0 ? 1 : 1 + Math.floor(rng.next() * 2);
      for (let k = 0; k < added; k++) ids.push(nextId++);
      // the last block is partial (128–511 tokens); the next turn extends it to a whole block (the
      // same id: its synthesised text is a prefix of the whole block's, mooncake-trace.ts blockText)
      const tail = 128 + Math.floor(rng.next() * (MOONCAKE_BLOCK_TOKENS - 128));
      out.push({
        timestampMs: (turn * opts.sessions + s) * opts.gapMs,
        inputLength: (ids.length - 1) * MOONCAKE_BLOCK_TOKENS + tail,
        outputLength: opts.outputLength,
        hashIds: [...ids],
      });
    }
  }
  return out;
}

export function traceJsonl(records: readonly TraceRecord[]): string {
  return records
    .map((r) =>
      JSON.stringify({
        timestamp: r.timestampMs,
        input_length: r.inputLength,
        output_length: r.outputLength,
        hash_ids: r.hashIds,
      }),
    )
    .join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      sessions: { type: 'string', default: '12' },
      turns: { type: 'string', default: '4' },
      'gap-ms': { type: 'string', default: '150' },
      seed: { type: 'string', default: '7' },
      'output-length': { type: 'string', default: '32' },
    },
  });
  const records = multiTurnTrace({
    sessions: Number(values.sessions),
    turns: Number(values.turns),
    gapMs: Number(values['gap-ms']),
    seed: Number(values.seed),
    outputLength: Number(values['output-length']),
  });
  process.stdout.write(`${traceJsonl(records)}\n`);
}
