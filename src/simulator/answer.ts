import { decode } from 'gpt-tokenizer/encoding/cl100k_base';
import { jsonInstance, SchemaError, type InstanceSource } from './json-instance.js';
import { pythonJson } from './python-json.js';
import type { GenRequest } from './request-body.js';
import { RequestError } from './request-error.js';
import type { OutputEnd } from './response-writer.js';
import {
  hashMore,
  nextWord,
  OUTPUT_VOCAB,
  planOutput,
  prng,
  tokenize,
  type PlannedOutput,
} from './tokens.js';

/**
 * JSON the model writes token by token (a tool call's arguments, or structured content): one SSE
 * event per piece; a piece is one cl100k token, or several when one token alone is not whole UTF-8.
 */
export interface JsonPieces {
  text: string;
  pieces: string[];
  ids: number[][];
  /** Output tokens (the ids of every piece). */
  tokens: number;
}

/** A tool call: a header event (id, name), then the arguments' pieces. */
export interface ToolCallOutput {
  id: string;
  name: string;
  /** The name's tokens: the header event counts them. */
  nameIds: number[];
  args: JsonPieces;
  /** finish_reason when the call completes (vLLM: "tool_calls", or "stop" for a named choice). */
  finish: 'tool_calls' | 'stop';
  content: '' | null;
}

/** Everything one choice outputs, in order: reasoning words, then content words or JSON, or a tool call. */
export interface ChoiceOutput {
  index: number;
  /** Seed of this choice's draws (choice 0: the request's). */
  seed: number;
  /** Vocabulary words: the first `reasoning` are reasoning text, the rest content. */
  words: Uint16Array;
  reasoning: number;
  /** Structured content (response_format / structured_outputs) after the reasoning words. */
  json: JsonPieces | null;
  tool: ToolCallOutput | null;
  end: OutputEnd;
}

/** SSE events (engine steps) of a choice. */
export function choiceSteps(c: ChoiceOutput): number {
  if (c.tool !== null) return c.words.length + 1 + c.tool.args.pieces.length;
  return c.words.length + (c.json?.pieces.length ?? 0);
}

/** Output tokens of a choice (what usage counts). */
export function choiceTokens(c: ChoiceOutput): number {
  if (c.tool !== null) return c.words.length + c.tool.nameIds.length + c.tool.args.tokens;
  return c.words.length + (c.json?.tokens ?? 0);
}

/** Choice k's seed: choice 0 keeps the request's, so `n: 1` answers exactly as before. */
export function choiceSeed(seed: number, k: number): number {
  return k === 0 ? seed : (seed ^ Math.imul(k, 0x85ebca6b)) | 0;
}

/**
 * Reasoning words of a plan of `n` words when thinking is on: the first half (rounded down), so
 * a one-token answer is content only. The simulator's rule (a real model decides), documented in
 * docs/simulator.md; the words are the same ones the answer has without thinking.
 */
export function reasoningWords(n: number): number {
  return Math.floor(n / 2);
}

/** Draws from the output vocabulary for JSON strings, seeded like the words of the answer. */
function instanceSource(seed: number, context: number): InstanceSource {
  let h = hashMore(context, '\u0000json');
  const r = prng(h ^ seed);
  return {
    next: r,
    word() {
      const w = nextWord(seed, h);
      h = hashMore(h, OUTPUT_VOCAB.text[w]!);
      return OUTPUT_VOCAB.text[w]!.slice(1);
    },
  };
}

/** `text` cut into its cl100k tokens, one piece per token (tokens that split a character merged). */
export function jsonPieces(text: string): JsonPieces {
  const pieces: string[] = [];
  const ids: number[][] = [];
  let pending: number[] = [];
  const all = tokenize(text);
  for (const id of all) {
    pending.push(id);
    const piece = decode(pending);
    if (piece.includes('\ufffd')) continue;
    pieces.push(piece);
    ids.push(pending);
    pending = [];
  }
  if (pending.length > 0) {
    pieces.push(decode(pending));
    ids.push(pending);
  }
  return { text, pieces, ids, tokens: all.length };
}

/** The first pieces of `p` holding at most `budget` tokens. */
function truncatePieces(p: JsonPieces, budget: number): JsonPieces {
  let tokens = 0;
  let k = 0;
  while (k < p.pieces.length && tokens + p.ids[k]!.length <= budget) tokens += p.ids[k++]!.length;
  const pieces = p.pieces.slice(0, k);
  return { text: pieces.join(''), pieces, ids: p.ids.slice(0, k), tokens };
}

/** A deterministic tool call id in the engine's form (vLLM `chatcmpl-tool-<32 hex>`, SGLang `call_<24 hex>`). */
function toolCallId(style: 'vllm' | 'sglang', seed: number, context: number, index: number): string {
  const r = prng(hashMore(context, `\u0000tool${index}`) ^ seed);
  let hex = '';
  const len = style === 'vllm' ? 32 : 24;
  while (hex.length < len)
    hex += Math.floor(r() * 0x100000000)
      .toString(16)
      .padStart(8, '0');
  hex = hex.slice(0, len);
  // vLLM: make_tool_call_id → f"chatcmpl-tool-{random_uuid()}" (uuid4 hex; vllm/entrypoints/chat_utils.py).
  // SGLang: OpenAIServingChat._process_tool_call_id → f"call_{uuid.uuid4().hex[:24]}" (serving_chat.py).
  return style === 'vllm' ? `chatcmpl-tool-${hex}` : `call_${hex}`;
}

export interface AnswerSettings {
  eosAt: number;
  /** Thinking on for this request (reasoning parser configured and not turned off by the request). */
  thinking: boolean;
  idStyle: 'vllm' | 'sglang';
}

/**
 * Choice k's output. The words are `planOutput` as before (so P/D legs and a union instance agree);
 * with thinking on their first half is reasoning. A tool call or structured content then follows
 * the reasoning words instead of the content words, and is bounded by max_tokens only when the
 * request set one (without it the document completes, as a model stops when its JSON closes).
 */
export function planChoice(
  g: GenRequest,
  k: number,
  context: number,
  maxTokens: number,
  settings: AnswerSettings,
): ChoiceOutput {
  const seed = choiceSeed(g.seed ?? 0, k);
  const plan: PlannedOutput = planOutput(seed, context, {
    maxTokens,
    stop: g.stop,
    minTokens: g.minTokens,
    naturalStop: g.naturalStop,
    eosAt: settings.eosAt,
  });
  const reasoning = settings.thinking ? reasoningWords(plan.words.length) : 0;
  const plain: ChoiceOutput = {
    index: k,
    seed,
    words: plan.words,
    reasoning,
    json: null,
    tool: null,
    end: { finish: plan.finishReason, stopReason: plan.stopReason, tokenless: false },
  };
  if (g.toolCall === null && g.format === null) return plain;
  const words = plan.words.subarray(0, reasoning);
  const budget = g.naturalStop ? Infinity : maxTokens - reasoning;
  const src = instanceSource(seed, context);
  if (g.toolCall !== null) {
    const nameIds = tokenize(g.toolCall.name);
    const full = jsonPieces(pythonJson(instanceOf(g.toolCall.parameters, src, 'tools')));
    const room = budget - nameIds.length;
    const args = room >= full.tokens ? full : truncatePieces(full, Math.max(0, room));
    const cut = args !== full;
    return {
      ...plain,
      words,
      tool: {
        id: toolCallId(settings.idStyle, seed, context, k),
        name: g.toolCall.name,
        nameIds,
        args,
        finish: g.toolCall.finish,
        content: g.toolCall.content,
      },
      end: { finish: cut ? 'length' : g.toolCall.finish, stopReason: null, tokenless: false },
    };
  }
  const value =
    g.format!.schema === null ? { result: src.word() } : instanceOf(g.format!.schema, src, 'response_format');
  const full = jsonPieces(pythonJson(value));
  const json = budget >= full.tokens ? full : truncatePieces(full, Math.max(0, budget));
  return {
    ...plain,
    words,
    json,
    end: { finish: json === full ? 'stop' : 'length', stopReason: null, tokenless: false },
  };
}

/** A schema the generator cannot satisfy is the client's error (400 naming the field). */
function instanceOf(schema: unknown, src: InstanceSource, param: string): unknown {
  try {
    return jsonInstance(schema, src);
  } catch (err) {
    if (err instanceof SchemaError) throw new RequestError(400, `${param}: ${err.message}`, param);
    throw err;
  }
}
