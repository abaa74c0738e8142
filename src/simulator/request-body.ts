import { isPlainObject, type JsonParseResult } from '../common/http.js';
import { RequestError } from './request-error.js';
import { parseJsonFormat, type JsonFormat } from './structured-output.js';
import { decideToolCall, type ToolDecision } from './tool-request.js';
import { renderChat, tokenize } from './tokens.js';

/**
 * JSON.parse that keeps `bootstrap_room` exact: SGLang rooms are 63-bit integers and may arrive as
 * JSON numbers beyond 2^53, so integer literals with ≥ 16 digits become decimal strings before
 * parsing. Rooms are always compared by their decimal string.
 */
export function parseJsonPreservingRoom(text: string): JsonParseResult {
  let src = text;
  if (src.includes('"bootstrap_room"')) {
    src = src.replace(/"bootstrap_room"(\s*):(\s*)(-?\d{16,})(?=\s*[,}\]])/g, '"bootstrap_room"$1:$2"$3"');
    // Batched SGLang /generate: one room per prompt (fixture sglang/mini-lb/generate-request.batch.json).
    src = src.replace(/"bootstrap_room"\s*:\s*\[[-\d\s,]*\]/g, (list) =>
      list.replace(/(-?\d{16,})(?=\s*[,\]])/g, '"$1"'),
    );
  }
  try {
    return { ok: true, value: JSON.parse(src) as unknown };
  } catch (err) {
    return { ok: false, message: `invalid JSON body: ${(err as Error).message}` };
  }
}

export { RequestError };

export interface BootstrapInfo {
  host: string;
  /** null: the receiving server's own bootstrap port (SGLang scheduler.py `handle_generate_request`). */
  port: number | null;
  /** Decimal string of the 63-bit room. */
  room: string;
}

export interface GenRequest {
  /** `generate`: SGLang's native /generate (sglang-generate.ts), answered in its own shape. */
  kind: 'chat' | 'completion' | 'generate';
  model: string;
  promptIds: number[];
  /** vLLM's block hashes of the prompt (`--tokenizer`, vllm-prompt.ts); absent: the cache's own. */
  blockKeys?: readonly bigint[] | undefined;
  /** Rendered prompt text (null when the prompt was given as token ids). */
  promptText: string | null;
  maxTokens: number;
  /** No max_tokens given: the default length counts as a natural stop. */
  naturalStop: boolean;
  minTokens: number;
  stop: Set<string> | null;
  stream: boolean;
  includeUsage: boolean;
  returnTokenIds: boolean;
  seed: number | null;
  /** `request_id` (vLLM) or `rid` (SGLang) from the body. */
  bodyRequestId: string | null;
  kv: Record<string, unknown> | null;
  bootstrap: BootstrapInfo | null;
  /** Chat with `tools`: the call the model makes instead of text (tool-request.ts); null: text. */
  toolCall: ToolDecision | null;
  /** `response_format` / `structured_outputs`: the content is JSON (structured-output.ts). */
  format: JsonFormat | null;
  /** Chat `chat_template_kwargs.enable_thinking` (Qwen3's template switch); null: not given. */
  enableThinking: boolean | null;
  /** Parallel samples (`n`): one choice each (answer.ts choiceSeed). */
  n: number;
  /** Completions `echo`: the answer text starts with the prompt. */
  echo: boolean;
  /** Chat `top_logprobs` when `logprobs: true` (0: the sampled token only); completions `logprobs`; null: none. */
  logprobs: number | null;
}

/** A bound of the simulator's own (vLLM's is its max_num_seqs): n choices are planned up front. */
const MAX_N = 128;

function optInt(body: Record<string, unknown>, key: string, min: number): number | null {
  const v = body[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw new RequestError(400, `'${key}' must be an integer`, key);
  }
  if (v < min) throw new RequestError(400, `'${key}' must be >= ${min}, got ${v}`, key);
  return v;
}

function optBool(body: Record<string, unknown>, key: string): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new RequestError(400, `'${key}' must be a boolean`, key);
  return v;
}

function messageContent(content: unknown, i: number): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    let s = '';
    for (const part of content) {
      if (!isPlainObject(part) || (part.type === 'text' && typeof part.text !== 'string')) {
        throw new RequestError(
          400,
          `'messages[${i}].content' parts must be {type:"text",text:string}`,
          'messages',
        );
      }
      if (part.type === 'text') s += part.text as string;
    }
    return s;
  }
  throw new RequestError(400, `'messages[${i}].content' must be a string or an array of parts`, 'messages');
}

/**
 * Prompt + max_tokens within `--max-model-len`, counted in the tokens the engine runs on: the model
 * tokenizer's when `--tokenizer` gave them (vllm-prompt.ts), else the simulator's own. Run after the
 * prompt is final.
 */
export function checkContextLength(g: GenRequest, maxModelLen: number): void {
  const promptLen = g.promptIds.length;
  if (promptLen + g.maxTokens <= maxModelLen) return;
  throw new RequestError(
    400,
    `This model's maximum context length is ${maxModelLen} tokens. However, you requested ` +
      `${promptLen + g.maxTokens} tokens (${promptLen} in the messages, ${g.maxTokens} in the ` +
      'completion). Please reduce the length of the messages or completion.',
    g.kind === 'chat' ? 'messages' : 'prompt',
  );
}

/** Validates a chat or completion body the way vLLM's OpenAI server does (subset) and tokenises it. */
export function parseGenRequest(
  kind: 'chat' | 'completion',
  value: unknown,
  defaults: { defaultMaxTokens: number },
): GenRequest {
  if (!isPlainObject(value)) throw new RequestError(400, 'request body must be a JSON object');
  const body = value;
  if (typeof body.model !== 'string' || body.model.length === 0) {
    throw new RequestError(400, "'model' is required and must be a non-empty string", 'model');
  }
  let promptIds: number[];
  let promptText: string | null;
  let toolCall: ToolDecision | null = null;
  let enableThinking: boolean | null = null;
  if (kind === 'chat') {
    const msgs = body.messages;
    if (!Array.isArray(msgs) || msgs.length === 0) {
      throw new RequestError(400, "'messages' is required and must be a non-empty array", 'messages');
    }
    const rendered = msgs.map((m, i) => {
      if (!isPlainObject(m) || typeof m.role !== 'string') {
        throw new RequestError(400, `'messages[${i}]' must be an object with a string 'role'`, 'messages');
      }
      return { role: m.role, content: messageContent(m.content, i) };
    });
    const continueFinal = optBool(body, 'continue_final_message');
    const addGenerationPrompt = body.add_generation_prompt !== false;
    if (continueFinal && addGenerationPrompt) {
      // vLLM ChatCompletionRequest.check_generation_prompt (vllm/entrypoints/openai/protocol.py, a
      // pydantic before-validator; add_generation_prompt defaults to true for chat)
      throw new RequestError(
        400,
        'Cannot set both `continue_final_message` and `add_generation_prompt` to True.',
      );
    }
    promptText = renderChat(rendered, { continueFinal, addGenerationPrompt });
    promptIds = tokenize(promptText);
    toolCall = decideToolCall(body, rendered);
    enableThinking = chatTemplateSwitch(body.chat_template_kwargs);
  } else {
    let p = body.prompt;
    if (Array.isArray(p) && p.length === 1 && (typeof p[0] === 'string' || Array.isArray(p[0]))) p = p[0];
    if (typeof p === 'string') {
      promptText = p;
      promptIds = tokenize(p);
    } else if (
      Array.isArray(p) &&
      p.length > 0 &&
      p.every((t) => Number.isInteger(t) && (t as number) >= 0)
    ) {
      promptText = null;
      promptIds = p as number[];
    } else if (Array.isArray(p) && p.length > 1) {
      throw new RequestError(400, 'batched prompts are not supported by the simulator', 'prompt');
    } else {
      throw new RequestError(
        400,
        "'prompt' is required and must be a string or a non-empty array of token ids",
        'prompt',
      );
    }
  }
  if (promptIds.length === 0) throw new RequestError(400, 'the prompt must not be empty', 'prompt');

  const maxTokensRaw = optInt(body, 'max_completion_tokens', 1) ?? optInt(body, 'max_tokens', 1);
  const maxTokens = maxTokensRaw ?? defaults.defaultMaxTokens;
  const n = optInt(body, 'n', 1) ?? 1;
  if (n > MAX_N) throw new RequestError(400, `'n' must be <= ${MAX_N}, got ${n}`, 'n');
  const minTokens = optInt(body, 'min_tokens', 0) ?? 0;
  let stop: Set<string> | null = null;
  if (typeof body.stop === 'string') stop = new Set([body.stop]);
  else if (Array.isArray(body.stop) && body.stop.every((s) => typeof s === 'string')) {
    stop = body.stop.length > 0 ? new Set(body.stop as string[]) : null;
  } else if (body.stop !== undefined && body.stop !== null) {
    throw new RequestError(400, "'stop' must be a string or an array of strings", 'stop');
  }
  const stream = optBool(body, 'stream');
  let includeUsage = false;
  if (body.stream_options !== undefined && body.stream_options !== null) {
    if (!isPlainObject(body.stream_options)) {
      throw new RequestError(400, "'stream_options' must be an object", 'stream_options');
    }
    if (!stream)
      throw new RequestError(400, 'Stream options can only be defined when `stream=True`.', 'stream_options');
    includeUsage = body.stream_options.include_usage === true;
  }
  const seedRaw = body.seed;
  if (
    seedRaw !== undefined &&
    seedRaw !== null &&
    (typeof seedRaw !== 'number' || !Number.isInteger(seedRaw))
  ) {
    throw new RequestError(400, "'seed' must be an integer", 'seed');
  }
  let bodyRequestId: string | null = null;
  for (const key of ['request_id', 'rid']) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string' || v.length === 0)
      throw new RequestError(400, `'${key}' must be a non-empty string`, key);
    bodyRequestId ??= v;
  }
  let kv: Record<string, unknown> | null = null;
  if (body.kv_transfer_params !== undefined && body.kv_transfer_params !== null) {
    if (!isPlainObject(body.kv_transfer_params)) {
      throw new RequestError(400, "'kv_transfer_params' must be an object", 'kv_transfer_params');
    }
    kv = body.kv_transfer_params;
  }
  let bootstrap: BootstrapInfo | null = null;
  if (body.bootstrap_room !== undefined && body.bootstrap_room !== null) {
    const room = body.bootstrap_room;
    const roomStr = typeof room === 'number' && Number.isInteger(room) ? String(room) : room;
    if (typeof roomStr !== 'string' || !/^\d+$/.test(roomStr)) {
      throw new RequestError(400, "'bootstrap_room' must be a non-negative integer", 'bootstrap_room');
    }
    const host = body.bootstrap_host;
    const port = body.bootstrap_port;
    if (typeof host !== 'string' || host.length === 0) {
      throw new RequestError(400, "'bootstrap_host' must be a non-empty string", 'bootstrap_host');
    }
    // mini_lb sends `bootstrap_port: null` when no --prefill-bootstrap-ports was given (mini_lb.py).
    if (
      port !== undefined &&
      port !== null &&
      (typeof port !== 'number' || !Number.isInteger(port) || port <= 0 || port > 65535)
    ) {
      throw new RequestError(400, "'bootstrap_port' must be a port number or null", 'bootstrap_port');
    }
    bootstrap = { host, port: port ?? null, room: BigInt(roomStr).toString() };
  }
  return {
    kind,
    model: body.model,
    promptIds,
    promptText,
    maxTokens,
    naturalStop: maxTokensRaw === null,
    minTokens,
    stop,
    stream,
    includeUsage,
    returnTokenIds: optBool(body, 'return_token_ids'),
    seed: typeof seedRaw === 'number' ? seedRaw : null,
    bodyRequestId,
    kv,
    bootstrap,
    toolCall,
    format: parseJsonFormat(body),
    enableThinking,
    logprobs: kind === 'chat' ? chatLogprobs(body) : optInt(body, 'logprobs', 0),
    n,
    echo: kind === 'completion' && optBool(body, 'echo'),
  };
}

/** Chat logprobs (vLLM ChatCompletionRequest: `logprobs` bool, `top_logprobs` 0–20 needs `logprobs`). */
function chatLogprobs(body: Record<string, unknown>): number | null {
  const on = optBool(body, 'logprobs');
  const top = optInt(body, 'top_logprobs', 0);
  if (top !== null && top > 20)
    throw new RequestError(400, `'top_logprobs' must be <= 20, got ${top}`, 'top_logprobs');
  if (!on) {
    if (top !== null && top > 0)
      throw new RequestError(
        400,
        'when using `top_logprobs`, `logprobs` must be set to true.',
        'top_logprobs',
      );
    return null;
  }
  return top ?? 0;
}

function chatTemplateSwitch(kwargs: unknown): boolean | null {
  if (kwargs === undefined || kwargs === null) return null;
  if (!isPlainObject(kwargs))
    throw new RequestError(400, "'chat_template_kwargs' must be an object", 'chat_template_kwargs');
  const v = kwargs.enable_thinking;
  return typeof v === 'boolean' ? v : null;
}
