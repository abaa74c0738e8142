import { decode, encode } from 'gpt-tokenizer/encoding/cl100k_base';

/**
 * Deterministic tokens for the simulator.
 *
 * Prompts are tokenised with the real cl100k_base BPE (gpt-tokenizer ships its vocabulary).
 * Special-token text in user input is encoded as plain text, never rejected.
 *
 * Chat template (documented, stable): every message renders as `<|role|>content\n`; the generation
 * prompt `<|assistant|>\n` is appended. Content arrays concatenate their `text` parts.
 *
 * Output tokens are words from a fixed list, each of which is exactly one cl100k token (with its
 * leading space). Each word is a function of the request seed and the whole context before it (the
 * prompt text plus the words so far): a request whose prompt is another's prompt plus part of its
 * output continues with exactly the rest of that output (in-flight migration, issue 16).
 */

const NO_SPECIAL = { disallowedSpecial: new Set<string>() };

/** BPE merges are quadratic in the length of one pre-token: a 60k-character run of `x` takes seconds. */
const LONG_RUN = /\S{256,}/g;
const HAS_LONG_RUN = /\S{256}/;
const RUN_CHUNK = 256;

/** The text of cl100k token ids (throws on an id outside the vocabulary). */
export function detokenize(ids: readonly number[]): string {
  return decode(ids);
}

/**
 * cl100k tokens of `text`. Runs of more than 256 non-space characters are encoded in 256-character
 * pieces (token boundaries at the cuts may differ from one-piece BPE), so hostile prompts cannot
 * block the event loop; ordinary text is encoded in one piece, exactly as before.
 */
export function tokenize(text: string): number[] {
  if (!HAS_LONG_RUN.test(text)) return encode(text, NO_SPECIAL);
  const out: number[] = [];
  const append = (piece: string): void => {
    for (const t of encode(piece, NO_SPECIAL)) out.push(t);
  };
  let last = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    const runEnd = m.index + m[0].length;
    let i = m.index + RUN_CHUNK;
    append(text.slice(last, i));
    while (runEnd - i > RUN_CHUNK) {
      append(text.slice(i, i + RUN_CHUNK));
      i += RUN_CHUNK;
    }
    last = i;
  }
  append(text.slice(last));
  return out;
}

export interface ChatMessageLike {
  role: string;
  content: string;
}

/**
 * The simulator's chat template. `continueFinal` (vLLM/SGLang `continue_final_message`) leaves the
 * last message open: it renders as its generation prompt `<|role|>\n` followed by its content, so
 * continuing a partial assistant answer gives the same text an uninterrupted generation saw
 * (as ChatML-style templates do). `addGenerationPrompt: false` omits the trailing `<|assistant|>\n`.
 */
export function renderChat(
  messages: readonly ChatMessageLike[],
  opts: { continueFinal?: boolean; addGenerationPrompt?: boolean } = {},
): string {
  let out = '';
  const open = opts.continueFinal === true ? messages.length - 1 : messages.length;
  for (let i = 0; i < open; i++) out += `<|${messages[i]!.role}|>${messages[i]!.content}\n`;
  if (open < messages.length) return out + `<|${messages[open]!.role}|>\n${messages[open]!.content}`;
  return opts.addGenerationPrompt === false ? out : out + '<|assistant|>\n';
}

const WORDS = (
  'the of and to in is that it for on with as was at by be this from or have an are not but ' +
  'all they we one can there which their will more when time other new some what about out up ' +
  'into only over also after first two way well then most any these many people where just like ' +
  'long make through back much before good year each those work should world great still how ' +
  'day same under last never because while high small place found part again home old number ' +
  'water light open river stone cloud green quiet story road bright morning city summer garden ' +
  'window forest music letter simple market silver winter island field table paper signal engine'
).split(' ');

export interface OutputVocab {
  /** Word text including its leading space. */
  text: string[];
  /** JSON string literal of `text[i]` (quoted, escaped) for SSE templates. */
  json: string[];
  /** cl100k token id of `text[i]`. */
  ids: number[];
}

function buildVocab(): OutputVocab {
  const text: string[] = [];
  const ids: number[] = [];
  for (const w of WORDS) {
    const t = ' ' + w;
    const enc = tokenize(t);
    if (enc.length === 1 && !text.includes(t)) {
      text.push(t);
      ids.push(enc[0]!);
    }
  }
  // The last entry is EOS: counted as an output token, no text (vLLM skips special tokens when detokenizing).
  text.push('');
  ids.push(EOS_TOKEN_ID);
  return { text, ids, json: text.map((t) => JSON.stringify(t)) };
}

/** cl100k_base `<|endoftext|>`. */
const EOS_TOKEN_ID = 100257;

export const OUTPUT_VOCAB: OutputVocab = buildVocab();
/** Index of EOS in OUTPUT_VOCAB; the PRNG draws words below it. */
export const EOS_WORD = OUTPUT_VOCAB.text.length - 1;

/** 32-bit FNV-1a of a string. */
export function hashString(s: string): number {
  return hashMore(0x811c9dc5, s);
}

/** FNV-1a continued from state `h` over `s`: hashMore(hashString(a), b) === hashString(a + b). */
export function hashMore(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: tiny, fast, good enough for picking words. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The FNV-1a state of a prompt, the start of its output's context: its text, or for a token-id
 * prompt the text those ids decode to — so a continuation sent as ids (prompt ids + output ids)
 * and one sent as text (prompt + output text) both continue the same context.
 */
export function promptContext(promptText: string | null, promptIds: readonly number[]): number {
  if (promptText !== null) return hashString(promptText);
  try {
    return hashString(decode(promptIds));
  } catch {
    // ids outside the vocabulary: no text; hash the ids themselves
    let h = 0x811c9dc5;
    for (const id of promptIds) h = Math.imul(h ^ id, 0x01000193);
    return h >>> 0;
  }
}

/** One mulberry32 step from `state`: a float in [0, 1) (no closure: one call per output word). */
function draw(state: number): number {
  const a = (state + 0x6d2b79f5) | 0;
  let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** The word after a context whose FNV-1a state is `context`, for request seed `seed`. */
export function nextWord(seed: number, context: number): number {
  return Math.floor(draw((Math.imul(seed | 0, 0x9e3779b1) ^ context) >>> 0) * EOS_WORD);
}

export interface PlannedOutput {
  /** Indices into OUTPUT_VOCAB, in order (an EOS ending included). */
  words: Uint16Array;
  finishReason: 'length' | 'stop';
  /** vLLM's `stop_reason`: the matched stop string, else null (EOS, length). */
  stopReason: string | null;
}

export interface OutputLimits {
  maxTokens: number;
  stop: ReadonlySet<string> | null;
  minTokens: number;
  /** No max_tokens given: reaching the default length counts as a natural EOS ("stop"). */
  naturalStop: boolean;
  /** `--eos-at`: the n-th output token (1-based) is EOS; 0 = off. */
  eosAt: number;
}

/**
 * Plans the whole output up front: up to `maxTokens` words, each `nextWord(seed, hash of the
 * context before it)`, the context starting at `context` (`hashString(prompt text)`). A stop string equal
 * to a generated word (without its leading space) ends the output before it ("stop", stop_reason =
 * the string); `eosAt` makes the n-th token EOS ("stop", stop_reason null). Neither fires while the
 * output is within `minTokens`: vLLM masks EOS at sampling (MinTokensLogitsProcessor,
 * vllm/v1/sample/logits_processor/builtin.py), skips it in check_stop (vllm/v1/core/sched/utils.py)
 * and skips stop strings while len(output) <= min_tokens (vllm/v1/engine/detokenizer.py
 * IncrementalDetokenizer.update) — so a suppressed EOS comes at the first allowed position instead.
 */
export function planOutput(seed: number, context: number, limits: OutputLimits): PlannedOutput {
  const { maxTokens, stop, minTokens, naturalStop } = limits;
  let h = context;
  const eosIndex = limits.eosAt > 0 ? Math.max(limits.eosAt - 1, minTokens) : -1;
  const words = new Uint16Array(maxTokens);
  for (let i = 0; i < maxTokens; i++) {
    if (i === eosIndex) {
      words[i] = EOS_WORD;
      return { words: words.subarray(0, i + 1), finishReason: 'stop', stopReason: null };
    }
    const w = nextWord(seed, h);
    h = hashMore(h, OUTPUT_VOCAB.text[w]!);
    const text = OUTPUT_VOCAB.text[w]!.slice(1);
    if (stop !== null && i >= minTokens && stop.has(text)) {
      return { words: words.subarray(0, i), finishReason: 'stop', stopReason: text };
    }
    words[i] = w;
  }
  return { words, finishReason: naturalStop ? 'stop' : 'length', stopReason: null };
}

export function outputText(words: Uint16Array): string {
  let s = '';
  for (let i = 0; i < words.length; i++) s += OUTPUT_VOCAB.text[words[i]!];
  return s;
}

export function outputTokenIds(words: Uint16Array): number[] {
  const ids = new Array<number>(words.length);
  for (let i = 0; i < words.length; i++) ids[i] = OUTPUT_VOCAB.ids[words[i]!]!;
  return ids;
}
