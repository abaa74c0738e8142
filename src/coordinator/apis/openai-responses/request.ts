import { isPlainObject } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';

/**
 * OpenAI Responses create request → a chat-completions body. Field lists: `ResponseCreateParamsBase`,
 * `ResponseInputItem` and `FunctionTool` of the `openai` SDK 6.49 (resources/responses/responses.d.ts).
 * vLLM serves Responses by the same route (vllm/entrypoints/openai/responses/serving.py renders the
 * input items as chat messages), SGLang has none, so the coordinator translates.
 */

type Json = Record<string, unknown>;

const invalid = (message: string, param: string): MotorError =>
  new MotorError('invalid_request', message, { param });

/**
 * Accepted fields. `include`, `service_tier`, `prompt_cache_key`, `safety_identifier`, `stream_options`
 * and `truncation` are accepted without effect (no encrypted reasoning, one service tier, the engines'
 * prefix cache, no truncation of the chain: an over-long prompt is the engine's 400). The rest of the
 * SDK's fields (`background`, `conversation`, `prompt`, `top_logprobs`, `max_tool_calls`, …) are refused
 * by name, which also keeps Motor's internal fields out.
 */
const RESPONSE_FIELDS = new Set([
  'model',
  'input',
  'instructions',
  'previous_response_id',
  'store',
  'stream',
  'stream_options',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'max_output_tokens',
  'temperature',
  'top_p',
  'text',
  'truncation',
  'metadata',
  'reasoning',
  'user',
  'include',
  'service_tier',
  'prompt_cache_key',
  'safety_identifier',
]);

/** Hosted tools run by OpenAI's servers: an engine cannot run them. */
const HOSTED_TOOL_PREFIXES = [
  'web_search',
  'file_search',
  'code_interpreter',
  'computer',
  'image_generation',
  'mcp',
  'local_shell',
  'shell',
  'apply_patch',
  'tool_search',
];

/** One input/output item as stored and replayed (`ResponseInputItem` / `ResponseOutputItem`). */
export type Item = Json;

export interface ParsedResponsesRequest {
  readonly model: string;
  readonly stream: boolean;
  readonly store: boolean;
  readonly previousResponseId: string | null;
  readonly instructions: string | null;
  /** This turn's input as items (a string input is one user message item). */
  readonly input: readonly Item[];
  /** The chat body fields other than `messages` (sampling, tools, format). */
  readonly chatFields: Json;
  /** What the Response object echoes back. */
  readonly echo: Json;
}

/** Validates a create request (throws a MotorError naming the field). */
export function parseResponsesRequest(body: unknown): ParsedResponsesRequest {
  if (!isPlainObject(body)) throw invalid('request body must be a JSON object', 'body');
  for (const key of Object.keys(body))
    if (!RESPONSE_FIELDS.has(key)) throw invalid(`Unknown parameter: '${key}'.`, key);
  if (typeof body.model !== 'string' || body.model === '')
    throw invalid("Missing required parameter: 'model'.", 'model');
  const input = inputItems(body.input);
  const chatFields: Json = {};
  const stream = bool(body, 'stream') ?? false;
  const store = bool(body, 'store') ?? true;
  const instructions = str(body, 'instructions');
  const previousResponseId = str(body, 'previous_response_id');
  const maxOutput = body.max_output_tokens;
  if (maxOutput !== undefined && maxOutput !== null) {
    if (typeof maxOutput !== 'number' || !Number.isInteger(maxOutput) || maxOutput < 1)
      throw invalid("'max_output_tokens' must be a positive integer", 'max_output_tokens');
    chatFields.max_tokens = maxOutput;
  }
  for (const key of ['temperature', 'top_p'] as const) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`'${key}' must be a number`, key);
    chatFields[key] = v;
  }
  const parallel = bool(body, 'parallel_tool_calls');
  const tools = functionTools(body.tools);
  if (tools.length > 0) chatFields.tools = tools;
  const toolChoice = chatToolChoice(body.tool_choice);
  if (toolChoice !== undefined) chatFields.tool_choice = toolChoice;
  if (parallel !== undefined && tools.length > 0) chatFields.parallel_tool_calls = parallel;
  const format = textFormat(body.text);
  if (format !== undefined) chatFields.response_format = format;
  if (
    body.truncation !== undefined &&
    body.truncation !== null &&
    body.truncation !== 'auto' &&
    body.truncation !== 'disabled'
  )
    throw invalid("'truncation' must be 'auto' or 'disabled'", 'truncation');
  const metadata = metadataOf(body.metadata);
  const reasoning = isPlainObject(body.reasoning) ? body.reasoning : null;
  if (body.reasoning !== undefined && body.reasoning !== null && reasoning === null)
    throw invalid("'reasoning' must be an object", 'reasoning');
  if (typeof reasoning?.effort === 'string') chatFields.reasoning_effort = reasoning.effort;
  const user = str(body, 'user');
  if (user !== null) chatFields.user = user;
  return {
    model: body.model,
    stream,
    store,
    previousResponseId,
    instructions,
    input,
    chatFields,
    echo: {
      instructions,
      max_output_tokens: chatFields.max_tokens ?? null,
      metadata,
      parallel_tool_calls: parallel ?? true,
      previous_response_id: previousResponseId,
      reasoning: { effort: reasoning?.effort ?? null, summary: null },
      store,
      temperature: chatFields.temperature ?? null,
      text: {
        format:
          isPlainObject(body.text) && isPlainObject(body.text.format) ? body.text.format : { type: 'text' },
      },
      tool_choice: body.tool_choice ?? 'auto',
      tools: Array.isArray(body.tools) ? body.tools : [],
      top_p: chatFields.top_p ?? null,
      truncation: body.truncation ?? 'disabled',
      user: user,
    },
  };
}

function inputItems(input: unknown): Item[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  if (!Array.isArray(input) || input.length === 0)
    throw invalid("'input' must be a string or a non-empty array of input items", 'input');
  return input.map((item, i) => {
    const at = `input[${i}]`;
    if (!isPlainObject(item)) throw invalid(`'${at}' must be an object`, at);
    // an easy input message may leave `type` out (`EasyInputMessage`)
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        if (!['user', 'assistant', 'system', 'developer'].includes(item.role as string))
          throw invalid(`'${at}.role' must be 'user', 'assistant', 'system' or 'developer'`, `${at}.role`);
        if (typeof item.content !== 'string' && !Array.isArray(item.content))
          throw invalid(`'${at}.content' must be a string or an array of content parts`, `${at}.content`);
        if (Array.isArray(item.content))
          item.content.forEach((p, j) => contentPart(p, `${at}.content[${j}]`));
        return { ...item, type: 'message' };
      }
      case 'function_call':
        if (
          typeof item.call_id !== 'string' ||
          typeof item.name !== 'string' ||
          typeof item.arguments !== 'string'
        )
          throw invalid(`'${at}' (function_call) needs string 'call_id', 'name' and 'arguments'`, at);
        return item;
      case 'function_call_output':
        if (typeof item.call_id !== 'string')
          throw invalid(`'${at}.call_id' must be a string`, `${at}.call_id`);
        if (typeof item.output !== 'string' && !Array.isArray(item.output))
          throw invalid(`'${at}.output' must be a string or an array of content parts`, `${at}.output`);
        return item;
      case 'reasoning':
        return item;
      case 'item_reference':
        if (typeof item.id !== 'string') throw invalid(`'${at}.id' must be a string`, `${at}.id`);
        return item;
      default:
        throw invalid(`'${at}.type': input item type '${String(type)}' is not supported`, `${at}.type`);
    }
  });
}

function contentPart(p: unknown, at: string): void {
  if (!isPlainObject(p)) throw invalid(`'${at}' must be an object`, at);
  if ((p.type === 'input_text' || p.type === 'output_text') && typeof p.text === 'string') return;
  if (p.type === 'input_image' && typeof p.image_url === 'string') return;
  if (p.type === 'refusal' && typeof p.refusal === 'string') return;
  throw invalid(`'${at}.type': content part '${String(p.type)}' is not supported`, `${at}.type`);
}

/**
 * A conversation's items → chat messages. `function_call` items join the assistant message before them
 * (chat carries calls as `tool_calls`), outputs become `tool` messages; every output must answer a call
 * of the conversation. Reasoning items are not replayed (chat templates drop earlier reasoning).
 */
export function itemsToMessages(items: readonly Item[], instructions: string | null): Json[] {
  const messages: Json[] = [];
  if (instructions !== null && instructions !== '') messages.push({ role: 'system', content: instructions });
  const calls = new Set<string>();
  items.forEach((item, i) => {
    if (item.type === 'message') {
      const role = item.role === 'developer' ? 'system' : item.role;
      messages.push({ role, content: messageContent(item.content) });
    } else if (item.type === 'function_call') {
      const call = {
        id: item.call_id,
        type: 'function',
        function: { name: item.name, arguments: item.arguments },
      };
      calls.add(item.call_id as string);
      const last = messages[messages.length - 1];
      if (last?.role === 'assistant')
        ((last.tool_calls as Json[] | undefined) ?? (last.tool_calls = [])).push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (item.type === 'function_call_output') {
      if (!calls.has(item.call_id as string))
        throw invalid(
          `'input[${i}].call_id': no function_call with call_id '${String(item.call_id)}' in the conversation`,
          'input',
        );
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: messageContent(item.output) });
    }
  });
  return messages;
}

function messageContent(content: unknown): unknown {
  if (typeof content === 'string') return content;
  const parts = (content as Json[]).map((p) =>
    p.type === 'input_image'
      ? { type: 'image_url', image_url: { url: p.image_url } }
      : { type: 'text', text: p.type === 'refusal' ? p.refusal : p.text },
  );
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts;
}

function functionTools(tools: unknown): Json[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalid("'tools' must be an array", 'tools');
  return tools.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isPlainObject(t) || typeof t.type !== 'string') throw invalid(`'${at}' must be a tool object`, at);
    if (t.type !== 'function') {
      const hosted = HOSTED_TOOL_PREFIXES.some((p) => (t.type as string).startsWith(p));
      throw invalid(
        `'${at}.type': ${hosted ? 'hosted' : 'the'} tool '${t.type}' is not supported (only function tools)`,
        `${at}.type`,
      );
    }
    if (typeof t.name !== 'string' || t.name === '') throw invalid(`'${at}.name' is required`, `${at}.name`);
    const fn: Json = {
      name: t.name,
      parameters: isPlainObject(t.parameters) ? t.parameters : { type: 'object' },
    };
    if (typeof t.description === 'string') fn.description = t.description;
    if (typeof t.strict === 'boolean') fn.strict = t.strict;
    return { type: 'function', function: fn };
  });
}

function chatToolChoice(choice: unknown): unknown {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isPlainObject(choice) && choice.type === 'function' && typeof choice.name === 'string')
    return { type: 'function', function: { name: choice.name } };
  throw invalid("'tool_choice' must be 'auto', 'none', 'required' or {type:'function', name}", 'tool_choice');
}

function textFormat(text: unknown): Json | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isPlainObject(text)) throw invalid("'text' must be an object", 'text');
  const f = text.format;
  if (f === undefined || f === null) return undefined;
  if (!isPlainObject(f)) throw invalid("'text.format' must be an object", 'text.format');
  if (f.type === 'text') return undefined;
  if (f.type === 'json_object') return { type: 'json_object' };
  if (f.type === 'json_schema') {
    if (typeof f.name !== 'string' || !isPlainObject(f.schema))
      throw invalid(
        "'text.format' (json_schema) needs a string 'name' and an object 'schema'",
        'text.format',
      );
    const json_schema: Json = { name: f.name, schema: f.schema };
    if (typeof f.strict === 'boolean') json_schema.strict = f.strict;
    if (typeof f.description === 'string') json_schema.description = f.description;
    return { type: 'json_schema', json_schema };
  }
  throw invalid("'text.format.type' must be 'text', 'json_object' or 'json_schema'", 'text.format.type');
}

/** Up to 16 string values, keys ≤ 64 and values ≤ 512 characters (`Shared.Metadata`). */
function metadataOf(m: unknown): Json | null {
  if (m === undefined || m === null) return null;
  if (!isPlainObject(m)) throw invalid("'metadata' must be an object of strings", 'metadata');
  const entries = Object.entries(m);
  if (entries.length > 16) throw invalid("'metadata' may hold at most 16 keys", 'metadata');
  for (const [k, v] of entries)
    if (k.length > 64 || typeof v !== 'string' || v.length > 512)
      throw invalid(
        `'metadata.${k}' must be a string of at most 512 characters (key at most 64)`,
        'metadata',
      );
  return m;
}

function bool(body: Json, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`'${key}' must be a boolean`, key);
  return v;
}

function str(body: Json, key: string): string | null {
  const v = body[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw invalid(`'${key}' must be a string`, key);
  return v;
}
