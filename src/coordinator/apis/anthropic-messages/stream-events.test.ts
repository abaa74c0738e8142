import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import type { ChatChunk } from '../chat-frames.js';
import { AnthropicStreamEncoder } from './stream-events.js';

/**
 * Chat chunks → the Messages stream, read back by the real client: `@anthropic-ai/sdk` 1.17
 * lib/MessageStream.ts accumulates `content_block_*` events by `index` and throws on a delta for a
 * block of another type, so a wrong index or a missing start fails `finalMessage()`. The event order is
 * `RawMessageStreamEvent` in resources/messages/messages.d.ts.
 */

const STOP = { stopSequences: ['END'] };

function encode(chunks: ChatChunk[]): string {
  const enc = new AnthropicStreamEncoder('msg_abc', 'model-x', STOP);
  return enc.start() + chunks.map((c) => enc.chunk(c)).join('') + enc.end();
}

/** The SDK reads our SSE bytes as if they came from Anthropic (its fetch is replaced, no socket). */
async function viaSdk(sse: string) {
  const client = new Anthropic({
    apiKey: 'k',
    maxRetries: 0,
    fetch: () =>
      Promise.resolve(new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } })),
  });
  const stream = client.messages.stream({ model: 'model-x', max_tokens: 8, messages: [] });
  const events: string[] = [];
  stream.on('streamEvent', (e) => events.push(e.type));
  const message = await stream.finalMessage();
  return { message, events };
}

const delta = (d: NonNullable<ChatChunk['choices']>[number]['delta'], finish: string | null = null) => ({
  choices: [{ index: 0, delta: d, finish_reason: finish }],
});
const usage = (prompt: number, completion: number, cached = 0): ChatChunk => ({
  choices: [],
  usage: {
    prompt_tokens: prompt,
    completion_tokens: completion,
    prompt_tokens_details: { cached_tokens: cached },
  },
});

describe('AnthropicStreamEncoder through @anthropic-ai/sdk MessageStream', () => {
  it.each<[string, ChatChunk[], Record<string, unknown>, string[]]>([
    [
      'text deltas → one text block; usage with cache reads on message_delta',
      [delta({ content: 'Hel' }), delta({ content: 'lo' }), delta({}, 'stop'), usage(30, 2, 16)],
      {
        content: [{ type: 'text', text: 'Hello' }],
        stop_reason: 'end_turn',
        usage: expect.objectContaining({ input_tokens: 14, output_tokens: 2, cache_read_input_tokens: 16 }),
      },
      [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    ],
    [
      'reasoning then text → a thinking block (index 0) then a text block (index 1)',
      [
        delta({ reasoning: 'let me ' }),
        delta({ reasoning_content: 'think' }),
        delta({ content: 'ok' }, 'length'),
      ],
      {
        content: [
          { type: 'thinking', thinking: 'let me think', signature: '' },
          { type: 'text', text: 'ok' },
        ],
        stop_reason: 'max_tokens',
      },
      [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    ],
    [
      'text then two streamed tool calls → input_json_delta blocks parsed by the SDK, stop_reason tool_use',
      [
        delta({ content: 'calling' }),
        delta({ tool_calls: [{ index: 0, id: 'x', function: { name: 'f', arguments: '{"a":' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
        delta({ tool_calls: [{ index: 1, id: 'y', function: { name: 'g', arguments: '{}' } }] }),
        delta({}, 'tool_calls'),
      ],
      {
        content: [
          { type: 'text', text: 'calling' },
          { type: 'tool_use', id: 'toolu_abc_0', name: 'f', input: { a: 1 } },
          { type: 'tool_use', id: 'toolu_abc_1', name: 'g', input: {} },
        ],
        stop_reason: 'tool_use',
      },
      [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    ],
    [
      'the matched stop sequence',
      [
        delta({ content: 'a' }),
        { choices: [{ index: 0, delta: {}, finish_reason: 'stop', stop_reason: 'END' }] },
      ],
      { stop_reason: 'stop_sequence', stop_sequence: 'END' },
      [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    ],
    [
      'an empty answer has no blocks',
      [delta({ content: '' }, 'stop')],
      { content: [], stop_reason: 'end_turn' },
      ['message_start', 'message_delta', 'message_stop'],
    ],
  ])('%s', async (_name, chunks, expected, events) => {
    const { message, events: got } = await viaSdk(encode(chunks));
    expect(message).toMatchObject({ id: 'msg_abc', model: 'model-x', role: 'assistant', ...expected });
    expect(got).toEqual(events);
  });

  it('a ping follows message_start (Anthropic sends one; clients must accept it)', () => {
    const enc = new AnthropicStreamEncoder('msg_abc', 'model-x', STOP);
    expect(enc.start()).toMatch(
      /^event: message_start\ndata: .*\n\nevent: ping\ndata: \{"type":"ping"\}\n\n$/,
    );
  });
});
