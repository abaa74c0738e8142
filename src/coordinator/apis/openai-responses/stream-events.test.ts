import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { ChatChunk } from '../chat-frames.js';
import {
  chatToOutput,
  ResponseIds,
  responsesUsage,
  storedInputItem,
  type ResponseShell,
} from './response-object.js';
import { ResponsesStreamEncoder } from './stream-events.js';

/**
 * Chat chunks → the Responses stream, read back by the real client: `openai` 6.49
 * lib/responses/ResponseStream.ts accumulates every event into a snapshot (ResponseAccumulator) and
 * throws on a delta for an output index or content index it has not seen added, so a missing
 * `output_item.added` / `content_part.added` fails `finalResponse()`. Event shapes:
 * `ResponseStreamEvent` in resources/responses/responses.d.ts, every one with `sequence_number`.
 */

const ids = new ResponseIds('req-0123-abcd');
const shell: ResponseShell = { ids, model: 'model-x', createdAt: 1, echo: { store: true } };

interface Encoded {
  sse: string;
  events: Array<{ type: string; sequence_number: number } & Record<string, unknown>>;
}

function encode(chunks: ChatChunk[]): Encoded {
  const enc = new ResponsesStreamEncoder(shell);
  let sse = enc.start() + chunks.map((c) => enc.chunk(c)).join('');
  sse += enc.finishItems();
  sse += enc.completedEvent(enc.finalResponse());
  const events = sse
    .split('\n\n')
    .filter((f) => f !== '')
    .map((f) => {
      const [eventLine, dataLine] = f.split('\n');
      const data = JSON.parse(dataLine!.slice('data: '.length)) as Encoded['events'][number];
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
  return { sse, events };
}

async function viaSdk(sse: string) {
  const client = new OpenAI({
    apiKey: 'k',
    maxRetries: 0,
    fetch: () =>
      Promise.resolve(new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } })),
  });
  return client.responses.stream({ model: 'model-x', input: 'x' }).finalResponse();
}

const delta = (d: NonNullable<ChatChunk['choices']>[number]['delta'], finish: string | null = null) => ({
  choices: [{ index: 0, delta: d, finish_reason: finish }],
});
const usage: ChatChunk = {
  choices: [],
  usage: {
    prompt_tokens: 30,
    completion_tokens: 4,
    total_tokens: 34,
    prompt_tokens_details: { cached_tokens: 16 },
    completion_tokens_details: { reasoning_tokens: 2 },
  },
};

describe('ResponsesStreamEncoder through openai ResponseStream', () => {
  it.each<[string, ChatChunk[], Record<string, unknown>, string[]]>([
    [
      'text → one message item; usage with cached and reasoning tokens',
      [delta({ content: 'Hel' }), delta({ content: 'lo' }), delta({}, 'stop'), usage],
      {
        status: 'completed',
        output_text: 'Hello',
        output: [
          {
            id: 'msg_0123abcd',
            type: 'message',
            status: 'completed',
            role: 'assistant',
            content: [expect.objectContaining({ type: 'output_text', text: 'Hello' })],
          },
        ],
        usage: {
          input_tokens: 30,
          input_tokens_details: { cached_tokens: 16 },
          output_tokens: 4,
          output_tokens_details: { reasoning_tokens: 2 },
          total_tokens: 34,
        },
      },
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ],
    ],
    [
      'reasoning then text → a reasoning item (index 0) then the message (index 1); length → incomplete',
      [delta({ reasoning: 'think' }), delta({ content: 'ok' }, 'length')],
      {
        status: 'incomplete',
        incomplete_details: { reason: 'max_output_tokens' },
        output: [
          { id: 'rs_0123abcd_0', type: 'reasoning', content: [{ type: 'reasoning_text', text: 'think' }] },
          expect.objectContaining({ type: 'message', content: [expect.objectContaining({ text: 'ok' })] }),
        ],
      },
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.reasoning_text.delta',
        'response.reasoning_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.incomplete',
      ],
    ],
    [
      'two streamed tool calls → function_call items with stable ids, arguments accumulated',
      [
        delta({ tool_calls: [{ index: 0, id: 'engine', function: { name: 'f', arguments: '{"a":' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
        delta({ tool_calls: [{ index: 1, function: { name: 'g', arguments: '{}' } }] }),
        delta({}, 'tool_calls'),
      ],
      {
        status: 'completed',
        output: [
          {
            id: 'fc_0123abcd_0',
            type: 'function_call',
            status: 'completed',
            call_id: 'call_0123abcd_0',
            name: 'f',
            arguments: '{"a":1}',
          },
          expect.objectContaining({ id: 'fc_0123abcd_1', name: 'g', arguments: '{}' }),
        ],
      },
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.completed',
      ],
    ],
  ])('%s', async (_name, chunks, expected, types) => {
    const { sse, events } = encode(chunks);
    expect(events.map((e) => e.type)).toEqual(types);
    // sequence numbers are contiguous from 0, as the SDK's `starting_after` resumption assumes
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const final = await viaSdk(sse);
    expect(final).toMatchObject({ id: 'resp_0123abcd', object: 'response', model: 'model-x', ...expected });
    // the final event's response is what the SDK accumulated from the deltas (it adds `parsed*`)
    const last = events[events.length - 1]!.response as { output: unknown[] };
    expect(final.output).toMatchObject(last.output);
  });

  it('response.failed closes the open item and carries the error', () => {
    const enc = new ResponsesStreamEncoder(shell);
    const sse = enc.start() + enc.chunk(delta({ content: 'part' })) + enc.failedEvent('engine_error', 'boom');
    const frames = sse.split('\n\n').filter((f) => f !== '');
    const last = JSON.parse(frames[frames.length - 1]!.split('\n')[1]!.slice(6)) as Record<string, unknown>;
    expect(last).toMatchObject({
      type: 'response.failed',
      sequence_number: frames.length - 1,
      response: {
        status: 'failed',
        error: { code: 'engine_error', message: 'boom' },
        output: [
          expect.objectContaining({ type: 'message', content: [expect.objectContaining({ text: 'part' })] }),
        ],
      },
    });
  });
});

describe('chatToOutput and responsesUsage (non-stream)', () => {
  it.each<[string, ChatChunk, unknown[], string]>([
    [
      'reasoning, text and a tool call, in that order',
      {
        choices: [
          {
            message: {
              reasoning_content: 'r',
              content: 't',
              tool_calls: [{ index: 0, function: { name: 'f', arguments: '{}' } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
      },
      [
        {
          id: 'rs_0123abcd_0',
          type: 'reasoning',
          summary: [],
          content: [{ type: 'reasoning_text', text: 'r' }],
        },
        expect.objectContaining({ id: 'msg_0123abcd', type: 'message', status: 'completed' }),
        expect.objectContaining({
          id: 'fc_0123abcd_0',
          call_id: 'call_0123abcd_0',
          name: 'f',
          arguments: '{}',
        }),
      ],
      'completed',
    ],
    [
      'length → incomplete',
      { choices: [{ message: { content: 'x' }, finish_reason: 'length' }] },
      [expect.anything()],
      'incomplete',
    ],
    [
      'an empty answer has no items',
      { choices: [{ message: { content: '' }, finish_reason: 'stop' }] },
      [],
      'completed',
    ],
  ])('%s', (_name, chat, output, status) => {
    expect(chatToOutput(chat, ids)).toEqual({ output, status });
  });

  it('usage: total from the parts when the engine gives none; null without usage', () => {
    expect(responsesUsage({ prompt_tokens: 3, completion_tokens: 2 })).toEqual({
      input_tokens: 3,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 5,
    });
    expect(responsesUsage(null)).toBeNull();
  });
});

describe('storedInputItem (what input_items lists)', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'a string user message → input_text parts, an id and a status',
      { type: 'message', role: 'user', content: 'hi' },
      {
        id: 'x_in0',
        type: 'message',
        role: 'user',
        status: 'completed',
        content: [{ type: 'input_text', text: 'hi' }],
      },
    ],
    [
      'a string assistant message → output_text parts',
      { type: 'message', role: 'assistant', content: 'ok' },
      {
        id: 'x_in0',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'ok', annotations: [], logprobs: [] }],
      },
    ],
    [
      'parts and a client id are kept',
      { type: 'message', role: 'user', id: 'mine', content: [{ type: 'input_text', text: 'a' }] },
      { id: 'mine', content: [{ type: 'input_text', text: 'a' }] },
    ],
    [
      'a function_call_output gets an id and nothing else',
      { type: 'function_call_output', call_id: 'c', output: 'r' },
      { id: 'x_in0', type: 'function_call_output', call_id: 'c', output: 'r' },
    ],
  ])('%s', (_name, item, expected) => {
    expect(storedInputItem(item, 'x_in0')).toMatchObject(expected);
  });
});
