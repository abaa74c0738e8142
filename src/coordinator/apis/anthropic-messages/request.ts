import { isPlainObject } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';

/**
 * Anthropic Messages request → the chat-completions body every flow already runs. The field lists are
 * the Messages API's `MessageCreateParamsBase` and its block params (`@anthropic-ai/sdk` 1.17,
 * resources/messages/messages.d.ts); the mapping of each field to its chat counterpart is the one
 * vLLM's own Messages front makes before it calls its chat server (vllm/entrypoints/anthropic/serving.py,
 * `AnthropicServingMessages._convert_anthropic_to_openai_request`), so vLLM, vllm-ascend and SGLang
 * (which has no Messages route) see the same chat request.
 */

type Json = Record<string, unknown>;

const invalid = (message: string, param: string): MotorError =>
  new MotorError('invalid_request', message, { param });

/**
 * Accepted top-level fields. Anything else is refused by name (Anthropic answers "Extra inputs are not
 * permitted"); this is also what keeps Motor's internal fields and `kv_transfer_params` out.
 * `thinking`, `service_tier`, `cache_control` and `context_management` are accepted and have no chat
 * counterpart: reasoning comes from the engine's reasoning parser, caching is the engine's prefix cache.
 */
const MESSAGE_FIELDS = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'metadata',
  'tools',
  'tool_choice',
  'thinking',
  'service_tier',
  'cache_control',
  'output_config',
]);

/** `count_tokens` takes the prompt fields only (`MessageCountTokensParams`). */
const COUNT_FIELDS = new Set([
  'model',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'thinking',
  'cache_control',
]);

export interface TranslatedMessages {
  /** The chat-completions body (no internal fields: validated by the chat validator after this). */
  chat: Json;
  model: string;
  stream: boolean;
  /** The request's `stop_sequences`: a chat `stop_reason` naming one is `stop_sequence`. */
  stopSequences: readonly string[];
}

/** A Messages create request; throws a MotorError naming the field for bad input. */
export function messagesToChat(body: unknown): TranslatedMessages {
  const req = checkTopLevel(body, MESSAGE_FIELDS);
  const maxTokens = req.max_tokens;
  if (maxTokens === undefined) throw invalid('max_tokens: Field required', 'max_tokens');
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)
    throw invalid('max_tokens: must be a positive integer', 'max_tokens');
  const chat = promptToChat(req);
  chat.max_tokens = maxTokens;
  const stream = optional(req, 'stream', 'boolean') === true;
  if (stream) {
    chat.stream = true;
    // the usage chunk gives message_delta its output_tokens (vLLM's converter asks for it too)
    chat.stream_options = { include_usage: true };
  }
  for (const key of ['temperature', 'top_p'] as const) {
    const v = optional(req, key, 'number');
    if (v !== undefined) chat[key] = v;
  }
  const topK = optional(req, 'top_k', 'number');
  if (topK !== undefined) {
    if (!Number.isInteger(topK)) throw invalid('top_k: must be an integer', 'top_k');
    chat.top_k = topK; // vLLM and SGLang take top_k as a chat sampling extension
  }
  const stopSequences = stringList(req.stop_sequences, 'stop_sequences');
  if (stopSequences.length > 0) chat.stop = stopSequences;
  if (req.metadata !== undefined) {
    if (!isPlainObject(req.metadata)) throw invalid('metadata: must be an object', 'metadata');
    const user = req.metadata.user_id;
    if (user !== undefined && user !== null) {
      if (typeof user !== 'string') throw invalid('metadata.user_id: must be a string', 'metadata.user_id');
      chat.user = user;
    }
  }
  outputConfig(req, chat);
  return { chat, model: chat.model as string, stream, stopSequences };
}

/** A `count_tokens` request: the prompt part only (no `max_tokens`). */
export function countTokensToChat(body: unknown): Json {
  return promptToChat(checkTopLevel(body, COUNT_FIELDS));
}

function checkTopLevel(body: unknown, allowed: ReadonlySet<string>): Json {
  if (!isPlainObject(body)) throw invalid('request body must be a JSON object', 'body');
  for (const key of Object.keys(body)) {
    if (!allowed.has(key)) throw invalid(`${key}: Extra inputs are not permitted`, key);
  }
  if (typeof body.model !== 'string' || body.model === '')
    throw invalid('model: Field required (a non-empty string)', 'model');
  return body;
}

function promptToChat(req: Json): Json {
  const messages: Json[] = [];
  const system = systemText(req.system);
  if (system !== null) messages.push({ role: 'system', content: system });
  if (!Array.isArray(req.messages) || req.messages.length === 0)
    throw invalid('messages: must be a non-empty array', 'messages');
  const toolUseIds = new Set<string>();
  req.messages.forEach((m, i) => convertMessage(m, i, messages, toolUseIds));
  const chat: Json = { model: req.model, messages };
  tools(req, chat);
  return chat;
}

function systemText(system: unknown): string | null {
  if (system === undefined || system === null) return null;
  if (typeof system === 'string') return system === '' ? null : system;
  if (!Array.isArray(system)) throw invalid('system: must be a string or an array of text blocks', 'system');
  const parts = system.map((b, i) => {
    if (!isPlainObject(b) || b.type !== 'text' || typeof b.text !== 'string')
      throw invalid(`system.${i}: must be a text block`, `system.${i}`);
    return b.text;
  });
  return parts.length === 0 ? null : parts.join('\n');
}

function convertMessage(m: unknown, i: number, out: Json[], toolUseIds: Set<string>): void {
  const at = `messages.${i}`;
  if (!isPlainObject(m)) throw invalid(`${at}: must be an object`, at);
  if (m.role !== 'user' && m.role !== 'assistant')
    throw invalid(`${at}.role: must be 'user' or 'assistant'`, `${at}.role`);
  if (typeof m.content === 'string') {
    out.push({ role: m.role, content: m.content });
    return;
  }
  if (!Array.isArray(m.content))
    throw invalid(`${at}.content: must be a string or an array of content blocks`, `${at}.content`);
  const parts: Json[] = [];
  const toolCalls: Json[] = [];
  const toolResults: Json[] = [];
  m.content.forEach((b, j) => {
    const where = `${at}.content.${j}`;
    if (!isPlainObject(b) || typeof b.type !== 'string')
      throw invalid(`${where}: must be a content block with a 'type'`, where);
    switch (b.type) {
      case 'text':
        if (typeof b.text !== 'string') throw invalid(`${where}.text: must be a string`, `${where}.text`);
        parts.push({ type: 'text', text: b.text });
        return;
      case 'image':
        parts.push({ type: 'image_url', image_url: { url: imageUrl(b.source, `${where}.source`) } });
        return;
      case 'thinking':
      case 'redacted_thinking':
        // earlier turns' reasoning is not replayed to the engine (chat templates drop it as well)
        return;
      case 'tool_use':
        if (m.role !== 'assistant')
          throw invalid(`${where}: tool_use blocks belong to assistant turns`, where);
        if (typeof b.id !== 'string' || typeof b.name !== 'string' || !isPlainObject(b.input))
          throw invalid(
            `${where}: tool_use needs a string 'id', a string 'name' and an object 'input'`,
            where,
          );
        toolUseIds.add(b.id);
        toolCalls.push({
          id: b.id,
          type: 'function',
          function: { name: b.name, arguments: JSON.stringify(b.input) },
        });
        return;
      case 'tool_result':
        if (m.role !== 'user') throw invalid(`${where}: tool_result blocks belong to user turns`, where);
        if (typeof b.tool_use_id !== 'string' || !toolUseIds.has(b.tool_use_id))
          throw invalid(
            `${where}.tool_use_id: no tool_use block with this id in an earlier assistant turn`,
            `${where}.tool_use_id`,
          );
        toolResults.push({
          role: 'tool',
          tool_call_id: b.tool_use_id,
          content: toolResultText(b.content, `${where}.content`, b.is_error === true),
        });
        return;
      default:
        throw invalid(`${where}.type: '${b.type}' content blocks are not supported`, `${where}.type`);
    }
  });
  // tool results answer the previous assistant turn: chat wants them as `tool` messages right after it
  out.push(...toolResults);
  if (parts.length > 0 || toolCalls.length > 0) {
    const msg: Json = { role: m.role };
    msg.content =
      parts.length === 0
        ? null
        : parts.every((p) => p.type === 'text')
          ? parts.map((p) => p.text).join('')
          : parts;
    if (toolCalls.length > 0) msg.tool_calls = toolCalls;
    out.push(msg);
  }
}

function imageUrl(source: unknown, where: string): string {
  if (!isPlainObject(source)) throw invalid(`${where}: must be an object`, where);
  if (source.type === 'url' && typeof source.url === 'string') return source.url;
  if (source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string')
    return `data:${source.media_type};base64,${source.data}`;
  throw invalid(`${where}: must be {type:'base64', media_type, data} or {type:'url', url}`, where);
}

function toolResultText(content: unknown, where: string, isError: boolean): string {
  let text: string;
  if (content === undefined || content === null) text = '';
  else if (typeof content === 'string') text = content;
  else if (Array.isArray(content))
    text = content
      .map((b, i) => {
        if (isPlainObject(b) && b.type === 'text' && typeof b.text === 'string') return b.text;
        throw invalid(`${where}.${i}: only text blocks are supported in tool results`, `${where}.${i}`);
      })
      .join('\n');
  else throw invalid(`${where}: must be a string or an array of text blocks`, where);
  return isError ? `Error: ${text}` : text;
}

function tools(req: Json, chat: Json): void {
  if (req.tools !== undefined) {
    if (!Array.isArray(req.tools)) throw invalid('tools: must be an array', 'tools');
    chat.tools = req.tools.map((t, i) => {
      const at = `tools.${i}`;
      if (!isPlainObject(t)) throw invalid(`${at}: must be an object`, at);
      // server tools (web search, bash, code execution, …) carry a versioned `type`: Anthropic runs
      // them, an engine cannot
      if (t.type !== undefined && t.type !== null && t.type !== 'custom')
        throw invalid(
          `${at}.type: server tool '${String(t.type)}' is not supported (only custom tools)`,
          `${at}.type`,
        );
      if (typeof t.name !== 'string' || t.name === '')
        throw invalid(`${at}.name: Field required`, `${at}.name`);
      if (!isPlainObject(t.input_schema))
        throw invalid(`${at}.input_schema: Field required (an object)`, `${at}.input_schema`);
      const fn: Json = { name: t.name, parameters: t.input_schema };
      if (typeof t.description === 'string') fn.description = t.description;
      return { type: 'function', function: fn };
    });
  }
  const choice = req.tool_choice;
  if (choice === undefined) return;
  if (!isPlainObject(choice)) throw invalid('tool_choice: must be an object', 'tool_choice');
  if (choice.type === 'auto') chat.tool_choice = 'auto';
  else if (choice.type === 'any') chat.tool_choice = 'required';
  else if (choice.type === 'none') chat.tool_choice = 'none';
  else if (choice.type === 'tool') {
    if (typeof choice.name !== 'string')
      throw invalid('tool_choice.name: Field required', 'tool_choice.name');
    chat.tool_choice = { type: 'function', function: { name: choice.name } };
  } else throw invalid("tool_choice.type: must be 'auto', 'any', 'tool' or 'none'", 'tool_choice.type');
  if (choice.disable_parallel_tool_use === true && chat.tools !== undefined) chat.parallel_tool_calls = false;
}

/** `output_config.format` (json_schema) → chat `response_format`; `effort` → `reasoning_effort`. */
function outputConfig(req: Json, chat: Json): void {
  const oc = req.output_config;
  if (oc === undefined || oc === null) return;
  if (!isPlainObject(oc)) throw invalid('output_config: must be an object', 'output_config');
  const format = oc.format;
  if (format !== undefined && format !== null) {
    if (!isPlainObject(format) || format.type !== 'json_schema' || !isPlainObject(format.schema))
      throw invalid("output_config.format: must be {type:'json_schema', schema}", 'output_config.format');
    chat.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema } };
  }
  if (typeof oc.effort === 'string') chat.reasoning_effort = oc.effort;
}

function optional(req: Json, key: string, type: 'number' | 'boolean'): number | boolean | undefined {
  const v = req[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== type || (type === 'number' && !Number.isFinite(v)))
    throw invalid(`${key}: must be a ${type}`, key);
  return v as number | boolean;
}

function stringList(v: unknown, key: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string'))
    throw invalid(`${key}: must be an array of strings`, key);
  return v;
}
