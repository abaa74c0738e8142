import { Prng, deriveSeed } from './prng.js';
import { WORDS, type Workload } from './workloads.js';

/**
 * The Mooncake FAST'25 trace format (github.com/kvcache-ai/Mooncake, FAST25-release/traces): JSON
 * lines `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}`, where
 * `hash_ids[i]` names the i-th 512-token block of the prompt (the last one possibly partial) and equal
 * ids at equal positions mean a shared prefix.
 *
 * The id count must be exactly ceil(input_length / 512). Checked against the public traces (Mooncake
 * HEAD, FAST25-release/traces): every line of conversation_trace.jsonl (12 031) and
 * synthetic_trace.jsonl (3 993) satisfies it, as do the arxiv-era mooncake_trace.jsonl lines read; the
 * AIPerf-compatible loaders refuse the rest (AISBench's mooncake_trace README: last block of
 * 1..512 tokens, else DSET-PARAM-004). A line with fewer or more ids has no agreed meaning (which
 * tokens do the ids cover?), so it is refused, naming the line, rather than guessed at.
 */
export const MOONCAKE_BLOCK_TOKENS = 512;

export interface TraceRecord {
  /** Arrival, ms from the trace's start. */
  timestampMs: number;
  inputLength: number;
  outputLength: number;
  hashIds: number[];
}

const isCount = (v: unknown, min: number): v is number => Number.isSafeInteger(v) && (v as number) >= min;

/** One line → a record, or a one-line reason it is not one. */
function parseLine(line: string): TraceRecord | string {
  let o: unknown;
  try {
    o = JSON.parse(line);
  } catch {
    return 'not JSON';
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return 'not a JSON object';
  const r = o as Record<string, unknown>;
  const ts = r.timestamp;
  if (typeof ts !== 'number' || !Number.isFinite(ts) || ts < 0) return 'timestamp must be a number ≥ 0 (ms)';
  if (!isCount(r.input_length, 1)) return 'input_length must be an integer ≥ 1';
  if (!isCount(r.output_length, 0)) return 'output_length must be an integer ≥ 0';
  const ids = r.hash_ids;
  if (!Array.isArray(ids) || !ids.every((id) => isCount(id, 0)))
    return 'hash_ids must be an array of integers ≥ 0';
  const blocks = Math.ceil(r.input_length / MOONCAKE_BLOCK_TOKENS);
  if (ids.length !== blocks)
    return `hash_ids has ${ids.length} ids, input_length ${r.input_length} needs ceil(${r.input_length}/${MOONCAKE_BLOCK_TOKENS}) = ${blocks}`;
  return { timestampMs: ts, inputLength: r.input_length, outputLength: r.output_length, hashIds: ids };
}

/** Parses a Mooncake JSONL trace (blank lines skipped); throws `line N: reason` on the first bad line. */
export function parseMooncakeTrace(text: string): TraceRecord[] {
  const out: TraceRecord[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    const rec = parseLine(line);
    if (typeof rec === 'string') throw new Error(`trace line ${i + 1}: ${rec}`);
    const prev = out[out.length - 1];
    if (prev && rec.timestampMs < prev.timestampMs)
      throw new Error(
        `trace line ${i + 1}: timestamp ${rec.timestampMs} is before the previous ${prev.timestampMs}`,
      );
    out.push(rec);
  }
  if (out.length === 0) throw new Error('trace has no records');
  return out;
}

/**
 * Arrival offsets (ms after the first record) multiplied by `timeScale`, as `motor sim --time-scale`
 * multiplies its delays: 0.1 replays ten times faster, 0 sends every request at once.
 */
export function traceArrivals(records: readonly TraceRecord[], timeScale: number): number[] {
  if (!(timeScale >= 0) || !Number.isFinite(timeScale)) throw new Error('time scale must be a number ≥ 0');
  const t0 = records[0]?.timestampMs ?? 0;
  return records.map((r) => (r.timestampMs - t0) * timeScale);
}

/**
 * The first `words` words of block `hashId`: each word is one token in the simulator's tokenizer,
 * with a leading space, so the text of a block is exactly `words` tokens and blocks concatenate on
 * token boundaries. A function of (seed, hashId) only: equal ids give byte-identical text.
 */
export function blockText(seed: number, hashId: number, words: number): string {
  const rng = new Prng(deriveSeed(seed, 5, hashId));
  let s = '';
  for (let i = 0; i < words; i++) s += ' ' + WORDS[Math.floor(rng.next() * WORDS.length)]!;
  return s;
}

/** The synthetic prompt of a record: its blocks' texts in order, `inputLength` words in all. */
export function tracePrompt(seed: number, rec: TraceRecord): string {
  let s = '';
  rec.hashIds.forEach((id, i) => {
    s += blockText(seed, id, Math.min(MOONCAKE_BLOCK_TOKENS, rec.inputLength - i * MOONCAKE_BLOCK_TOKENS));
  });
  return s;
}

export interface TraceWorkloadOptions {
  seed: number;
  /** Cap on max_tokens (= output_length, at least 1). */
  maxTokensCap: number;
}

/**
 * Request i = record i: one user message (tracePrompt), max_tokens = min(output_length, cap), at
 * least 1. The warm-up stream (1) is not supported for traces: a trace has no second request stream.
 */
export function createTraceWorkload(records: readonly TraceRecord[], opts: TraceWorkloadOptions): Workload {
  const seed = opts.seed >>> 0;
  const total = records.reduce((s, r) => s + r.inputLength, 0);
  return {
    name: 'mooncake-trace',
    settings: {
      seed,
      maxTokens: opts.maxTokensCap,
      promptTokens: Math.round(total / Math.max(1, records.length)),
      traceRecords: records.length,
    },
    request(index) {
      const rec = records[index];
      if (!rec) throw new Error(`trace has no record ${index}`);
      const maxTokens = Math.max(1, Math.min(rec.outputLength, opts.maxTokensCap));
      return { messages: [{ role: 'user', content: tracePrompt(seed, rec) }], maxTokens };
    },
  };
}
