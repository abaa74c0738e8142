import { isPlainObject } from '../common/http.js';
import { RequestError } from './request-error.js';

/** The call the simulated model makes instead of answering with text. */
export interface ToolDecision {
  name: string;
  /** The function's `parameters` JSON schema (the arguments are generated to validate against it). */
  parameters: unknown;
  /**
   * The choice's finish_reason when the call completes: "tool_calls" for `auto` and `required`,
   * "stop" for a named tool_choice (vLLM chat_completion/serving.py
   * `chat_completion_full_generator` / `chat_completion_stream_generator`, main 2026).
   */
  finish: 'tool_calls' | 'stop';
  /**
   * `message.content` beside the call (non-stream): "" for `required` and named (vLLM builds the
   * message with `content or ""`), null for `auto` (the tool parser returns no content).
   */
  content: '' | null;
}

interface ToolSpec {
  name: string;
  parameters: unknown;
}

/**
 * What a chat request's `tools` / `tool_choice` make the simulated model do (null: answer with text).
 * vLLM's rules (chat_completion/protocol.py ChatCompletionRequest, main 2026): `tool_choice` defaults
 * to "auto" when tools are sent; a named choice must name a sent tool (400 otherwise); "required"
 * and a named choice always call. The simulator has no language model, so "auto" follows a
 * documented rule instead of a judgement: it calls when the conversation ends with a user message
 * whose text mentions a tool's name (case-insensitive) — the first such tool in `tools` order —
 * and answers with text otherwise, so a follow-up carrying the tool's result (`role: "tool"`)
 * gets text and an agent loop ends. "required" calls the first mentioned tool, else the first tool.
 * One call per answer (no parallel calls).
 */
export function decideToolCall(
  body: Record<string, unknown>,
  messages: readonly { role: string; content: string }[],
): ToolDecision | null {
  const tools = parseTools(body.tools);
  const choice = body.tool_choice;
  if (tools.length === 0) {
    if (choice !== undefined && choice !== null && choice !== 'none' && choice !== 'auto')
      throw new RequestError(400, 'When using `tool_choice`, `tools` must be set.', 'tool_choice');
    return null;
  }
  if (choice === 'none') return null;
  const last = messages[messages.length - 1];
  const lastUser = last !== undefined && last.role === 'user' ? last.content.toLowerCase() : null;
  const mentioned =
    lastUser === null ? undefined : tools.find((t) => lastUser.includes(t.name.toLowerCase()));
  if (choice === undefined || choice === null || choice === 'auto') {
    return mentioned === undefined ? null : decision(mentioned, 'tool_calls', null);
  }
  if (choice === 'required') return decision(mentioned ?? tools[0]!, 'tool_calls', '');
  if (isPlainObject(choice) && isPlainObject(choice.function) && typeof choice.function.name === 'string') {
    const name = choice.function.name;
    const tool = tools.find((t) => t.name === name);
    if (tool === undefined)
      throw new RequestError(400, `Tool '${name}' has not been passed in \`tools\`.`, 'tool_choice');
    return decision(tool, 'stop', '');
  }
  throw new RequestError(
    400,
    '\'tool_choice\' must be "none", "auto", "required" or {type:"function",function:{name}}',
    'tool_choice',
  );
}

function decision(
  t: ToolSpec,
  finish: ToolDecision['finish'],
  content: ToolDecision['content'],
): ToolDecision {
  return { name: t.name, parameters: t.parameters, finish, content };
}

function parseTools(raw: unknown): ToolSpec[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new RequestError(400, "'tools' must be an array", 'tools');
  return raw.map((t, i) => {
    if (!isPlainObject(t) || !isPlainObject(t.function) || typeof t.function.name !== 'string') {
      throw new RequestError(
        400,
        `'tools[${i}]' must be {type:"function",function:{name,parameters}}`,
        'tools',
      );
    }
    if (t.type !== undefined && t.type !== 'function')
      throw new RequestError(400, `'tools[${i}].type' must be "function"`, 'tools');
    const parameters = t.function.parameters ?? { type: 'object', properties: {} };
    if (!isPlainObject(parameters))
      throw new RequestError(400, `'tools[${i}].function.parameters' must be a JSON schema object`, 'tools');
    return { name: t.function.name, parameters };
  });
}
