import { describe, expect, it } from 'vitest';
import type { ApiKind } from '../client-request.js';
import { assembleAnswer } from './assembled-answer.js';

const sse = (...frames: object[]): Buffer =>
  Buffer.from([...frames.map((f) => `data: ${JSON.stringify(f)}\n\n`), 'data: [DONE]\n\n'].join(''));
const HEAD = { id: 'x1', created: 7, model: 'm' };
const chat = (choice: object, extra: object = {}) => ({
  ...HEAD,
  object: 'chat.completion.chunk',
  choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }],
  ...extra,
});
const cmpl = (choice: object, extra: object = {}) => ({
  ...HEAD,
  object: 'text_completion',
  choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }],
  ...extra,
});
const USAGE = { prompt_tokens: 3, total_tokens: 5, completion_tokens: 2 };
const usageFrame = (object: string) => ({ ...HEAD, object, choices: [], usage: USAGE });
const lp = (token: string) => ({ token, logprob: -1, bytes: null, top_logprobs: [] });

const cases: Array<[string, ApiKind, Buffer, unknown]> = [
  [
    'chat: role frame, content, finish with stop_reason, usage',
    'chat',
    sse(
      chat({ delta: { role: 'assistant', content: '' } }),
      chat({ delta: { content: 'Hi' } }),
      chat({ delta: { content: ' there' }, finish_reason: 'stop', stop_reason: '!' }),
      usageFrame('chat.completion.chunk'),
    ),
    {
      ...HEAD,
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'Hi there' },
          logprobs: null,
          finish_reason: 'stop',
          stop_reason: '!',
        },
      ],
      usage: USAGE,
    },
  ],
  [
    'chat: logprobs joined, token ids and prompt token ids, reasoning kept under its key',
    'chat',
    sse(
      chat({ delta: { role: 'assistant', content: '' } }, { prompt_token_ids: [1, 2, 3] }),
      chat({ delta: { reasoning_content: 'hm' }, token_ids: [9] }),
      chat({ delta: { content: 'A' }, logprobs: { content: [lp('A')] }, token_ids: [4] }),
      chat({ delta: { content: 'B' }, logprobs: { content: [lp('B')] }, token_ids: [5] }),
      chat({ delta: {}, finish_reason: 'length' }),
      usageFrame('chat.completion.chunk'),
    ),
    {
      ...HEAD,
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'AB', reasoning_content: 'hm' },
          logprobs: { content: [lp('A'), lp('B')] },
          finish_reason: 'length',
          stop_reason: null,
          token_ids: [9, 4, 5],
        },
      ],
      usage: USAGE,
      prompt_token_ids: [1, 2, 3],
    },
  ],
  [
    'completions: text, the four logprob lists joined, choice-level prompt token ids',
    'completion',
    sse(
      cmpl(
        {
          text: 'a',
          logprobs: { text_offset: [0], token_logprobs: [-1], tokens: ['a'], top_logprobs: [null] },
          prompt_token_ids: [7],
        },
        {},
      ),
      cmpl({
        text: 'b',
        logprobs: { text_offset: [1], token_logprobs: [-2], tokens: ['b'], top_logprobs: [null] },
        finish_reason: 'length',
        stop_reason: null,
      }),
      usageFrame('text_completion'),
    ),
    {
      ...HEAD,
      object: 'text_completion',
      choices: [
        {
          index: 0,
          text: 'ab',
          logprobs: {
            text_offset: [0, 1],
            token_logprobs: [-1, -2],
            tokens: ['a', 'b'],
            top_logprobs: [null, null],
          },
          finish_reason: 'length',
          stop_reason: null,
          prompt_token_ids: [7],
        },
      ],
      usage: USAGE,
    },
  ],
  ['no answer frame → null', 'chat', Buffer.from('data: [DONE]\n\n'), null],
];

describe('assembleAnswer', () => {
  it.each(cases)('%s', (_name, kind, frames, want) => {
    expect(assembleAnswer(kind, frames)).toEqual(want);
  });

  it('keeps vLLM’s key order (the body is byte-equal to the engine’s own)', () => {
    const got = assembleAnswer('chat', cases[0]![2])!;
    expect(Object.keys(got)).toEqual(['id', 'object', 'created', 'model', 'choices', 'usage']);
    const choice = (got.choices as object[])[0]!;
    expect(Object.keys(choice)).toEqual(['index', 'message', 'logprobs', 'finish_reason', 'stop_reason']);
  });
});
