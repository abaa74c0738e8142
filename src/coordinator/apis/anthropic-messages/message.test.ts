import { describe, expect, it } from 'vitest';
import type { ChatChunk } from '../chat-frames.js';
import { anthropicUsage, chatToMessage, messageIdFor, stopReasonOf, toolUseId } from './message.js';

/**
 * Chat answer → Messages `Message`. `StopReason` and `Usage` are `@anthropic-ai/sdk` 1.17
 * resources/messages/messages.d.ts: `input_tokens` excludes cache reads (the doc comment on
 * `Usage.input_tokens`: total input = input + cache_creation + cache_read). vLLM names the matched stop
 * string in `stop_reason` (vllm/outputs.py `CompletionOutput.stop_reason`, relayed on the chat choice).
 */

const STOP = { stopSequences: ['END'] };

describe('stopReasonOf', () => {
  it.each<[string | null, string | number | null, string, string | null]>([
    ['stop', null, 'end_turn', null],
    ['stop', 'END', 'stop_sequence', 'END'],
    // a stop string the client did not ask for (e.g. the chat template's) is an ordinary end of turn
    ['stop', '<|im_end|>', 'end_turn', null],
    ['stop', 151645, 'end_turn', null],
    ['length', null, 'max_tokens', null],
    ['tool_calls', null, 'tool_use', null],
    [null, null, 'end_turn', null],
  ])('finish %s, engine stop %s → %s', (finish, engineStop, reason, sequence) => {
    expect(stopReasonOf(finish, engineStop, STOP)).toEqual({ stop_reason: reason, stop_sequence: sequence });
  });
});

describe('anthropicUsage', () => {
  it.each<[string, ChatChunk['usage'], Record<string, number>]>([
    [
      'cached prompt tokens are cache reads, not input',
      { prompt_tokens: 100, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 64 } },
      { input_tokens: 36, output_tokens: 7, cache_read_input_tokens: 64, cache_creation_input_tokens: 0 },
    ],
    [
      'no cache details',
      { prompt_tokens: 10, completion_tokens: 2 },
      { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    ],
    [
      'no usage at all',
      null,
      { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    ],
  ])('%s', (_name, usage, expected) => {
    expect(anthropicUsage(usage)).toEqual(expected);
  });
});

describe('chatToMessage', () => {
  const id = messageIdFor('req-0123-4567');

  it('ids are made from the root request id (the same on every attempt)', () => {
    expect(id).toBe('msg_01234567');
    expect(toolUseId(id, 2)).toBe('toolu_01234567_2');
  });

  it.each<[string, ChatChunk, Record<string, unknown>]>([
    [
      'text, end_turn',
      { choices: [{ message: { content: 'hello' }, finish_reason: 'stop' }] },
      { content: [{ type: 'text', text: 'hello' }], stop_reason: 'end_turn', stop_sequence: null },
    ],
    [
      'reasoning (vLLM `reasoning`) → a thinking block before the text',
      { choices: [{ message: { reasoning: 'hmm', content: 'ok' }, finish_reason: 'length' }] },
      {
        content: [
          { type: 'thinking', thinking: 'hmm', signature: '' },
          { type: 'text', text: 'ok' },
        ],
        stop_reason: 'max_tokens',
      },
    ],
    [
      'SGLang `reasoning_content` is thinking too',
      { choices: [{ message: { reasoning_content: 'r' }, finish_reason: 'stop' }] },
      { content: [{ type: 'thinking', thinking: 'r', signature: '' }] },
    ],
    [
      'tool calls → tool_use blocks with parsed input, stop_reason tool_use',
      {
        choices: [
          {
            message: {
              content: null,
              tool_calls: [
                { index: 0, id: 'engine-id', function: { name: 'f', arguments: '{"a":1}' } },
                { index: 1, function: { name: 'g', arguments: 'not json' } },
              ],
            },
            finish_reason: 'tool_calls',
          },
        ],
      },
      {
        content: [
          { type: 'tool_use', id: 'toolu_01234567_0', name: 'f', input: { a: 1 } },
          { type: 'tool_use', id: 'toolu_01234567_1', name: 'g', input: { raw: 'not json' } },
        ],
        stop_reason: 'tool_use',
      },
    ],
    [
      'the matched stop sequence',
      { choices: [{ message: { content: 'x' }, finish_reason: 'stop', stop_reason: 'END' }] },
      { stop_reason: 'stop_sequence', stop_sequence: 'END' },
    ],
    [
      'usage with cache reads',
      {
        choices: [{ message: { content: 'x' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 20, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 16 } },
      },
      {
        usage: {
          input_tokens: 4,
          output_tokens: 1,
          cache_read_input_tokens: 16,
          cache_creation_input_tokens: 0,
        },
      },
    ],
  ])('%s', (_name, chat, expected) => {
    const m = chatToMessage(chat, id, 'model-x', STOP);
    expect(m).toMatchObject({ id, type: 'message', role: 'assistant', model: 'model-x', ...expected });
  });
});
