import { describe, expect, it } from 'vitest';
import { MotorError } from '../../../common/motor-error.js';
import { countTokensToChat, messagesToChat } from './request.js';

/**
 * Messages request → chat body. Shapes of the inputs: `MessageCreateParamsBase` and its block params in
 * `@anthropic-ai/sdk` 1.17 resources/messages/messages.d.ts (TextBlockParam, ImageBlockParam with
 * Base64ImageSource / URLImageSource, ToolUseBlockParam, ToolResultBlockParam, ToolChoiceAuto/Any/Tool/
 * None, ThinkingConfigEnabled, Metadata.user_id). The chat side is what vLLM's own Messages front builds
 * (vllm/entrypoints/anthropic/serving.py `_convert_anthropic_to_openai_request`): system first, images
 * as `image_url` parts, tool_use → assistant `tool_calls`, tool_result → `tool` messages,
 * `any` → `required`, stop_sequences → `stop`.
 */

const base = { model: 'm', max_tokens: 16 };
const user = (content: unknown) => ({ role: 'user', content });
const WEATHER = {
  name: 'get_weather',
  description: 'weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } } },
};
const toolUse = { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } };

describe('messagesToChat: the chat body', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'string content, max_tokens',
      { ...base, messages: [user('hi')] },
      { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
    ],
    [
      'system string → the first system message',
      { ...base, system: 'be brief', messages: [user('hi')] },
      {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'system text blocks are joined with newlines',
      {
        ...base,
        system: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b', cache_control: { type: 'ephemeral' } },
        ],
        messages: [user('hi')],
      },
      { messages: [{ role: 'system', content: 'a\nb' }, { role: 'user' }] },
    ],
    [
      'text blocks only → one string',
      {
        ...base,
        messages: [
          user([
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ]),
        ],
      },
      { messages: [{ role: 'user', content: 'ab' }] },
    ],
    [
      'base64 and url images → image_url parts beside the text',
      {
        ...base,
        messages: [
          user([
            { type: 'text', text: 'what is this' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } },
          ]),
        ],
      },
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
              { type: 'image_url', image_url: { url: 'https://example.com/x.png' } },
            ],
          },
        ],
      },
    ],
    [
      'earlier thinking blocks are not replayed',
      {
        ...base,
        messages: [
          user('q'),
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hmm', signature: 's' },
              { type: 'text', text: 'a' },
            ],
          },
          user('q2'),
        ],
      },
      {
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a' },
          { role: 'user', content: 'q2' },
        ],
      },
    ],
    [
      'tools, tool_use → tool_calls, tool_result → a tool message before the user text',
      {
        ...base,
        tools: [WEATHER],
        messages: [
          user('weather?'),
          { role: 'assistant', content: [{ type: 'text', text: 'calling' }, toolUse] },
          user([
            { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] },
            { type: 'text', text: 'thanks' },
          ]),
        ],
      },
      {
        tools: [
          {
            type: 'function',
            function: {
              name: 'get_weather',
              description: 'weather for a city',
              parameters: WEATHER.input_schema,
            },
          },
        ],
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: 'calling',
            tool_calls: [
              {
                id: 'toolu_1',
                type: 'function',
                function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
              },
            ],
          },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
          { role: 'user', content: 'thanks' },
        ],
      },
    ],
    [
      'an assistant turn of only tool_use has null content; is_error marks the result',
      {
        ...base,
        messages: [
          user('x'),
          { role: 'assistant', content: [toolUse] },
          user([{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'boom', is_error: true }]),
        ],
      },
      {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: null, tool_calls: [expect.objectContaining({ id: 'toolu_1' })] },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'Error: boom' },
        ],
      },
    ],
    [
      "tool_choice any → 'required', disable_parallel_tool_use → parallel_tool_calls false",
      {
        ...base,
        tools: [WEATHER],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
        messages: [user('x')],
      },
      { tool_choice: 'required', parallel_tool_calls: false },
    ],
    [
      'tool_choice tool → a named function',
      {
        ...base,
        tools: [WEATHER],
        tool_choice: { type: 'tool', name: 'get_weather' },
        messages: [user('x')],
      },
      { tool_choice: { type: 'function', function: { name: 'get_weather' } } },
    ],
    [
      'tool_choice auto / none',
      { ...base, tools: [WEATHER], tool_choice: { type: 'none' }, messages: [user('x')] },
      { tool_choice: 'none' },
    ],
    [
      'sampling, stop_sequences → stop, metadata.user_id → user',
      {
        ...base,
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ['END', '###'],
        metadata: { user_id: 'u-1' },
        messages: [user('x')],
      },
      { temperature: 0.5, top_p: 0.9, top_k: 40, stop: ['END', '###'], user: 'u-1' },
    ],
    [
      'stream asks the engine for the usage chunk',
      { ...base, stream: true, messages: [user('x')] },
      { stream: true, stream_options: { include_usage: true } },
    ],
    [
      'output_config.format json_schema → response_format',
      {
        ...base,
        output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
        messages: [user('x')],
      },
      {
        response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } },
      },
    ],
  ])('%s', (_name, body, expected) => {
    expect(messagesToChat(body).chat).toMatchObject(expected);
  });

  it('thinking is accepted and adds nothing to the chat body (reasoning is the engine parser’s)', () => {
    const plain = messagesToChat({ ...base, messages: [user('x')] }).chat;
    const thinking = messagesToChat({
      ...base,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [user('x')],
    }).chat;
    expect(thinking).toEqual(plain);
  });

  it('returns the stop sequences and the stream flag beside the body', () => {
    const t = messagesToChat({ ...base, stream: true, stop_sequences: ['END'], messages: [user('x')] });
    expect(t.stopSequences).toEqual(['END']);
    expect(t.stream).toBe(true);
    expect(t.model).toBe('m');
    const plain = messagesToChat({ ...base, messages: [user('x')] });
    expect(plain.stream).toBe(false);
    expect(plain.chat).not.toHaveProperty('stream');
    expect(plain.chat).not.toHaveProperty('stop');
  });
});

describe('messagesToChat: bad input names the field', () => {
  it.each<[string, unknown, string]>([
    ['not an object', [], 'body'],
    ['model missing', { max_tokens: 1, messages: [user('x')] }, 'model'],
    ['max_tokens missing', { model: 'm', messages: [user('x')] }, 'max_tokens'],
    ['max_tokens zero', { ...base, max_tokens: 0, messages: [user('x')] }, 'max_tokens'],
    ['max_tokens fractional', { ...base, max_tokens: 1.5, messages: [user('x')] }, 'max_tokens'],
    ['messages empty', { ...base, messages: [] }, 'messages'],
    ['an unknown role', { ...base, messages: [{ role: 'system', content: 'x' }] }, 'messages.0.role'],
    [
      'an unknown block type',
      { ...base, messages: [user([{ type: 'document' }])] },
      'messages.0.content.0.type',
    ],
    [
      'an image without a valid source',
      { ...base, messages: [user([{ type: 'image', source: { type: 'file', file_id: 'f' } }])] },
      'messages.0.content.0.source',
    ],
    [
      'a tool_result without its tool_use',
      { ...base, messages: [user([{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'r' }])] },
      'messages.0.content.0.tool_use_id',
    ],
    ['tool_use in a user turn', { ...base, messages: [user([toolUse])] }, 'messages.0.content.0'],
    [
      'a server tool',
      { ...base, tools: [{ type: 'web_search_20250305', name: 'web_search' }], messages: [user('x')] },
      'tools.0.type',
    ],
    [
      'a tool without input_schema',
      { ...base, tools: [{ name: 't' }], messages: [user('x')] },
      'tools.0.input_schema',
    ],
    [
      'tool_choice of an unknown type',
      { ...base, tool_choice: { type: 'x' }, messages: [user('x')] },
      'tool_choice.type',
    ],
    ['system not text', { ...base, system: [{ type: 'image' }], messages: [user('x')] }, 'system.0'],
    ['stop_sequences not strings', { ...base, stop_sequences: [1], messages: [user('x')] }, 'stop_sequences'],
    ['top_k fractional', { ...base, top_k: 1.5, messages: [user('x')] }, 'top_k'],
    [
      'metadata.user_id not a string',
      { ...base, metadata: { user_id: 1 }, messages: [user('x')] },
      'metadata.user_id',
    ],
    // what keeps Motor's internal fields and a smuggled KV handoff out of the legs
    ['kv_transfer_params', { ...base, kv_transfer_params: {}, messages: [user('x')] }, 'kv_transfer_params'],
    ['an unknown field', { ...base, n: 2, messages: [user('x')] }, 'n'],
  ])('%s → invalid_request on %s', (_name, body, param) => {
    let err: unknown;
    try {
      messagesToChat(body);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MotorError);
    expect((err as MotorError).code).toBe('invalid_request');
    expect((err as MotorError).status).toBe(400);
    expect((err as MotorError).param).toBe(param);
  });
});

describe('countTokensToChat', () => {
  it('needs no max_tokens and gives the prompt part with tools', () => {
    expect(countTokensToChat({ model: 'm', system: 's', tools: [WEATHER], messages: [user('x')] })).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'x' },
      ],
      tools: [expect.objectContaining({ type: 'function' })],
    });
  });

  it('refuses generation fields (MessageCountTokensParams has none)', () => {
    expect(() => countTokensToChat({ model: 'm', max_tokens: 5, messages: [user('x')] })).toThrow(
      /max_tokens/,
    );
  });
});
