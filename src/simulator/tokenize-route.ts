import type { ServerResponse } from 'node:http';
import { isPlainObject, sendJson } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import { tokenizeInputOf, UnsupportedPromptError } from '../model-tokenizer/index.js';
import type { SimCore } from './engine.js';
import type { SimOptions } from './options.js';
import { parseModelBody } from './model-body.js';
import { parseGenRequest, parseJsonPreservingRoom, RequestError } from './request-body.js';
import { detokenize } from './tokens.js';

/**
 * vLLM's `POST /tokenize` (vllm-project/vllm vllm/entrypoints/serve/tokenize/api_router.py
 * `tokenize`, protocol.py `TokenizeChatRequest` / `TokenizeCompletionRequest` / `TokenizeResponse`,
 * main 2026; vllm/entrypoints/openai/api_server.py + serving_tokenization.py in the 0.6–0.11
 * releases). A body with `messages` is the chat form (`add_generation_prompt` default true,
 * `continue_final_message`), rendered with the chat template as a chat request is; otherwise `prompt`
 * (a string) is tokenised as a completions prompt. `model` is optional and, when given, must be the
 * served one (404 otherwise, as `_check_model`). Answer: `{count, max_model_len, tokens, token_strs}`
 * (`token_strs` stays null: the simulator has no token strings).
 *
 * With `--tokenizer` the model's own tokenizer and template tokenise (the ids a generation request is
 * then counted and hashed with); without it the simulator's own chat rendering and word tokens. The
 * request's own `chat_template` and non-default `add_special_tokens` are refused (400): Motor's
 * tokenizer cannot reproduce them, and a probe must not be answered approximately.
 */
export async function handleTokenize(
  opts: SimOptions,
  core: SimCore,
  res: ServerResponse,
  text: string,
): Promise<void> {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok) throw new HttpError(400, parsed.message);
  const body = parsed.value;
  if (!isPlainObject(body)) throw new RequestError(400, 'request body must be a JSON object');
  if (body.model !== undefined && body.model !== null && body.model !== opts.model)
    throw new HttpError(404, `The model \`${String(body.model)}\` does not exist.`, { param: 'model' });
  const chat = body.messages !== undefined;
  if (chat && body.chat_template != null)
    throw new RequestError(400, 'a request chat_template is not supported by the simulator', 'chat_template');
  if (body.add_special_tokens !== undefined && body.add_special_tokens !== !chat)
    throw new RequestError(400, 'a non-default add_special_tokens is not supported by the simulator');
  if (!chat && typeof body.prompt !== 'string')
    throw new RequestError(400, "'prompt' is required and must be a string", 'prompt');
  const kind = chat ? 'chat' : 'completion';
  // the simulator's own validation and tokens (what it counts as prompt_tokens without --tokenizer)
  const own = parseGenRequest(kind, { ...body, model: opts.model, max_tokens: 1 }, opts);
  let tokens = own.promptIds;
  const input = core.vllmPrompt === null ? null : tokenizeInputOf(kind, body);
  if (core.vllmPrompt !== null) {
    if (input === null) throw new RequestError(400, 'this prompt cannot be tokenised by the simulator');
    try {
      tokens = Array.from((await core.vllmPrompt.client.tokenize(input)).tokenIds);
    } catch (err) {
      if (err instanceof UnsupportedPromptError) throw new RequestError(400, err.message, 'messages');
      throw err;
    }
  }
  sendJson(res, 200, { count: tokens.length, max_model_len: opts.maxModelLen, tokens, token_strs: null });
}

/**
 * vLLM's `POST /detokenize` (vllm/entrypoints/serve/tokenize/api_router.py `detokenize`, protocol.py
 * `DetokenizeRequest {model?, tokens}` → `DetokenizeResponse {prompt}`, commit 030ea52e): the ids
 * decoded with the simulator's prompt tokenizer (cl100k_base), the inverse of `/tokenize` without
 * `--tokenizer`. With `--tokenizer` it is refused: the model's tokenizer runs in a worker that only
 * encodes, and a probe must not be answered with another vocabulary's text.
 */
export function handleDetokenize(opts: SimOptions, core: SimCore, res: ServerResponse, text: string): void {
  const body = parseModelBody(opts, text);
  const tokens = body.tokens;
  if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && (t as number) >= 0))
    throw new RequestError(400, "'tokens' must be a list of non-negative integers", 'tokens');
  if (core.vllmPrompt !== null)
    throw new RequestError(400, '/detokenize is not supported by the simulator with --tokenizer');
  let prompt: string;
  try {
    prompt = detokenize(tokens as number[]);
  } catch {
    throw new RequestError(400, "'tokens' holds an id outside the vocabulary", 'tokens');
  }
  sendJson(res, 200, { prompt });
}
