import { describe, expect, it } from 'vitest';
import { MotorError } from '../../../common/motor-error.js';
import { itemsToMessages, parseResponsesRequest } from './request.js';

/**
 * Responses create request → chat. Input shapes: `ResponseCreateParamsBase`, `ResponseInputItem`
 * (`EasyInputMessage`, `ResponseInputItem.Message`, `ResponseFunctionToolCall`,
 * `ResponseInputItem.FunctionCallOutput`, `ResponseInputItem.ItemReference`), `FunctionTool` and
 * `ResponseFormatTextJSONSchemaConfig` in `openai` 6.49 resources/responses/responses.d.ts. The chat
 * side follows vLLM's Responses front (vllm/entrypoints/openai/responses/serving.py renders
 * `instructions` as the system message and function_call / function_call_output as assistant
 * `tool_calls` and `tool` messages).
 */

const base = { model: 'm' };

describe('parseResponsesRequest', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'a string input is one user message; store defaults to true, stream to false',
      { ...base, input: 'hi' },
      {
        model: 'm',
        stream: false,
        store: true,
        previousResponseId: null,
        instructions: null,
        input: [{ type: 'message', role: 'user', content: 'hi' }],
      },
    ],
    [
      'an easy input message without `type`',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }] }] },
      { input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x' }] }] },
    ],
    [
      'max_output_tokens → max_tokens; sampling; user; reasoning.effort → reasoning_effort',
      {
        ...base,
        input: 'x',
        max_output_tokens: 32,
        temperature: 0.2,
        top_p: 0.5,
        user: 'u',
        reasoning: { effort: 'low' },
      },
      { chatFields: { max_tokens: 32, temperature: 0.2, top_p: 0.5, user: 'u', reasoning_effort: 'low' } },
    ],
    [
      'function tools and a named tool_choice; parallel_tool_calls',
      {
        ...base,
        input: 'x',
        tools: [
          { type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: true },
        ],
        tool_choice: { type: 'function', name: 'f' },
        parallel_tool_calls: false,
      },
      {
        chatFields: {
          tools: [
            {
              type: 'function',
              function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true },
            },
          ],
          tool_choice: { type: 'function', function: { name: 'f' } },
          parallel_tool_calls: false,
        },
      },
    ],
    [
      'text.format json_schema → response_format',
      {
        ...base,
        input: 'x',
        text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      },
      {
        chatFields: {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'out', schema: { type: 'object' }, strict: true },
          },
        },
      },
    ],
    [
      'store false, stream, instructions, previous_response_id, metadata echoed',
      {
        ...base,
        input: 'x',
        store: false,
        stream: true,
        instructions: 'be brief',
        previous_response_id: 'resp_1',
        metadata: { k: 'v' },
      },
      {
        store: false,
        stream: true,
        instructions: 'be brief',
        previousResponseId: 'resp_1',
        echo: expect.objectContaining({ metadata: { k: 'v' }, store: false, instructions: 'be brief' }),
      },
    ],
  ])('%s', (_name, body, expected) => {
    expect(parseResponsesRequest(body)).toMatchObject(expected);
  });

  it('text.format text adds no response_format', () => {
    expect(
      parseResponsesRequest({ ...base, input: 'x', text: { format: { type: 'text' } } }).chatFields,
    ).toEqual({});
  });

  it.each<[string, unknown, string]>([
    ['not an object', 'x', 'body'],
    ['model missing', { input: 'x' }, 'model'],
    ['input of the wrong kind', { ...base, input: 5 }, 'input'],
    ['input empty', { ...base, input: [] }, 'input'],
    ['an unknown item type', { ...base, input: [{ type: 'computer_call_output' }] }, 'input[0].type'],
    [
      'a message with a bad role',
      { ...base, input: [{ type: 'message', role: 'tool', content: 'x' }] },
      'input[0].role',
    ],
    [
      'an unsupported content part',
      { ...base, input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] },
      'input[0].content[0].type',
    ],
    [
      'a function_call without call_id',
      { ...base, input: [{ type: 'function_call', name: 'f', arguments: '{}' }] },
      'input[0]',
    ],
    [
      'a function_call_output without call_id',
      { ...base, input: [{ type: 'function_call_output', output: 'x' }] },
      'input[0].call_id',
    ],
    ['a hosted tool', { ...base, input: 'x', tools: [{ type: 'web_search_preview' }] }, 'tools[0].type'],
    [
      'a function tool without a name',
      { ...base, input: 'x', tools: [{ type: 'function' }] },
      'tools[0].name',
    ],
    ['a bad tool_choice', { ...base, input: 'x', tool_choice: 'sometimes' }, 'tool_choice'],
    ['max_output_tokens zero', { ...base, input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
    [
      'json_schema without a name',
      { ...base, input: 'x', text: { format: { type: 'json_schema', schema: {} } } },
      'text.format',
    ],
    ['a bad truncation', { ...base, input: 'x', truncation: 'middle' }, 'truncation'],
    ['metadata with a non-string value', { ...base, input: 'x', metadata: { k: 1 } }, 'metadata'],
    ['store not a boolean', { ...base, input: 'x', store: 'yes' }, 'store'],
    // keeps Motor's internal fields and a smuggled KV handoff out of the legs
    ['kv_transfer_params', { ...base, input: 'x', kv_transfer_params: {} }, 'kv_transfer_params'],
    [
      'an SDK field Motor does not serve (background)',
      { ...base, input: 'x', background: true },
      'background',
    ],
  ])('%s → invalid_request on %s', (_name, body, param) => {
    let err: unknown;
    try {
      parseResponsesRequest(body);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MotorError);
    expect((err as MotorError).status).toBe(400);
    expect((err as MotorError).param).toBe(param);
  });

  it('names the hosted tool in the message', () => {
    expect(() => parseResponsesRequest({ ...base, input: 'x', tools: [{ type: 'file_search' }] })).toThrow(
      /hosted tool 'file_search'/,
    );
  });
});

describe('itemsToMessages', () => {
  it.each<[string, Record<string, unknown>[], string | null, Record<string, unknown>[]]>([
    [
      'instructions first; developer is system; content parts joined',
      [
        { type: 'message', role: 'developer', content: 'rules' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'a' },
            { type: 'input_text', text: 'b' },
          ],
        },
      ],
      'be brief',
      [
        { role: 'system', content: 'be brief' },
        { role: 'system', content: 'rules' },
        { role: 'user', content: 'ab' },
      ],
    ],
    [
      'an image part keeps the parts as chat parts',
      [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'see' },
            { type: 'input_image', image_url: 'https://x/y.png' },
          ],
        },
      ],
      null,
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'see' },
            { type: 'image_url', image_url: { url: 'https://x/y.png' } },
          ],
        },
      ],
    ],
    [
      'an assistant output message, its function calls joined to it, outputs as tool messages',
      [
        { type: 'message', role: 'user', content: 'weather?' },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        {
          type: 'message',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'calling', annotations: [] }],
        },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{"a":1}' },
        { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'sunny' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'ok' }] },
      ],
      null,
      [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: 'calling',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
            { id: 'c2', type: 'function', function: { name: 'g', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        { role: 'tool', tool_call_id: 'c2', content: 'ok' },
      ],
    ],
    [
      'a function call with no assistant text before it is its own assistant message',
      [
        { type: 'message', role: 'user', content: 'x' },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'r' },
      ],
      '',
      [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'r' },
      ],
    ],
  ])('%s', (_name, items, instructions, expected) => {
    expect(itemsToMessages(items, instructions)).toEqual(expected);
  });

  it('a function_call_output that answers no call of the conversation is refused', () => {
    expect(() =>
      itemsToMessages([{ type: 'function_call_output', call_id: 'nope', output: 'x' }], null),
    ).toThrow(/no function_call with call_id 'nope'/);
  });
});
