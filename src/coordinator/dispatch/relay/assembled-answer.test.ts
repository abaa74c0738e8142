import { describe, expect, it } from 'vitest';
import type { RequestObserver } from '../../../observability/dispatch-observer.js';
import { Migration } from '../migration/migration.js';
import { SentRecord } from '../migration/sent-so-far.js';
import type { ApiKind, ClientRequest } from '../../internal-request/client-request.js';
import { AnswerFold, assembleAnswer, FOLD_BYTES } from './assembled-answer.js';

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

/**
 * The same frames with a space before each `data:` take the one-parse-per-frame path only (a template
 * needs a frame to start `data: {`): every answer must equal that one, byte for byte.
 */
const wholeParses = (frames: Buffer): Buffer =>
  Buffer.from(
    frames
      .toString('latin1')
      .split('\n\n')
      .map((f) => (f.startsWith('data:') ? ` ${f}` : f))
      .join('\n\n'),
    'latin1',
  );
const raw = (...frames: string[]): Buffer => Buffer.from(frames.join(''));
const chunk = (content: string, tail = ',"logprobs":null,"finish_reason":null}]}') =>
  `data: {"id":"c-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":${content}}${tail}\n\n`;
const text = (t: string, tail = ',"logprobs":null,"finish_reason":null}]}') =>
  `data: {"id":"c-1","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":${t}${tail}\n\n`;
const USAGE_FRAME =
  'data: {"id":"c-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":1}}\n\n';
const DONE = 'data: [DONE]\n\n';

const templated: Array<[string, ApiKind, Buffer]> = [
  ['plain words', 'chat', raw(chunk('"a"'), chunk('" b"'), chunk('" c"'), USAGE_FRAME, DONE)],
  [
    'escapes, unicode, a surrogate pair split over two frames',
    'chat',
    raw(
      chunk('"a"'),
      chunk('"\\"q\\" \\\\"'),
      chunk('"caf\u00e9 \\u00e9"'),
      chunk('"\\ud83d"'),
      chunk('"\\ude00"'),
      DONE,
    ),
  ],
  [
    'raw multi-byte text and an empty string',
    'chat',
    raw(chunk('"x"'), chunk('"日本"'), chunk('""'), chunk('"🙂"'), DONE),
  ],
  [
    'a value that is not one string',
    'chat',
    raw(chunk('"a"'), chunk('"b","content":"c"'), chunk('null'), chunk('1'), DONE),
  ],
  [
    'an invalid escape and a raw control byte: the frame is skipped as before',
    'chat',
    raw(chunk('"a"'), chunk('"\\x"'), chunk('"b\tc"'), chunk('"d"'), DONE),
  ],
  [
    'frames that only look alike: other ids, finish, logprobs, token ids',
    'chat',
    raw(
      chunk('"a"'),
      chunk('"b"', ',"logprobs":null,"finish_reason":null,"token_ids":[5]}]}'),
      chunk('"c"', ',"logprobs":{"content":[]},"finish_reason":null}]}'),
      chunk('"d"').replace('"c-1"', '"c-2"'),
      chunk('"e"', ',"logprobs":null,"finish_reason":"stop","stop_reason":null}]}'),
      USAGE_FRAME,
      DONE,
    ),
  ],
  [
    'extra blank lines, a frame without its separator at the end',
    'chat',
    raw(chunk('"a"'), '\n', chunk('"b"'), chunk('"c"').slice(0, -2)),
  ],
  [
    'a frame with trailing spaces and one cut short',
    'chat',
    raw(
      chunk('"a"'),
      chunk('"b"').replace('}\n\n', '}  \n\n'),
      chunk('"c"').slice(0, 40) + '\n\n',
      chunk('"d"'),
      DONE,
    ),
  ],
  [
    'a duplicate content key after the value',
    'chat',
    raw(
      chunk('"a"'),
      chunk('"b"', ',"content":"z"},"logprobs":null,"finish_reason":null}]}'),
      chunk('"c"'),
      DONE,
    ),
  ],
  [
    'reasoning beside content',
    'chat',
    raw(
      chunk('"a"', ',"reasoning_content":"r"},"logprobs":null,"finish_reason":null}]}'),
      chunk('"b"', ',"reasoning_content":"s"},"logprobs":null,"finish_reason":null}]}'),
      DONE,
    ),
  ],
  [
    'completions text',
    'completion',
    raw(
      text('"a"'),
      text('"b"'),
      text('"\\n"'),
      text('"c"', ',"logprobs":null,"finish_reason":"length","stop_reason":null}]}'),
      DONE,
    ),
  ],
];

describe('assembleAnswer: frames read through a template', () => {
  it.each(templated)('%s: the same answer as one parse per frame', (_name, kind, frames) => {
    const slow = wholeParses(frames);
    expect(slow.equals(frames)).toBe(false); // the reference really takes the other path
    expect(JSON.stringify(assembleAnswer(kind, frames))).toBe(JSON.stringify(assembleAnswer(kind, slow)));
  });

  it('reads the text of templated frames', () => {
    const got = assembleAnswer('chat', templated[1]![2])!;
    expect((got.choices as Array<{ message: { content: string } }>)[0]!.message.content).toBe(
      'a"q" \\café é😀',
    );
  });
});

describe('AnswerFold: a long answer is folded as it comes, holding a bounded batch of frame bytes', () => {
  /** A 30,000-token chat answer (~4.5 MB of frames), some frames with logprobs so both paths fold. */
  const TOKENS = 30_000;
  const long = (): { frames: Buffer; text: string } => {
    const parts = [chat({ delta: { role: 'assistant', content: '' } })];
    let text = '';
    for (let i = 0; i < TOKENS; i++) {
      const t = ` w${i % 97}`;
      text += t;
      parts.push(
        chat({ delta: { content: t }, ...(i % 1000 === 0 ? { logprobs: { content: [lp(t)] } } : {}) }),
      );
    }
    parts.push(chat({ delta: {}, finish_reason: 'length' }), usageFrame('chat.completion.chunk'));
    return { frames: sse(...parts), text };
  };
  const { frames, text } = long();

  it.each([
    ['one chunk', frames.length],
    ['1 KiB chunks (frames cut across chunks)', 1024],
    ['frame-sized odd chunks', 137],
  ])('%s: the whole answer, the stream rules’ summary, never more than a batch held', (_n, size) => {
    const fold = new AnswerFold('chat');
    let most = 0;
    for (let at = 0; at < frames.length; at += size) {
      fold.record(frames.subarray(at, Math.min(frames.length, at + size)));
      most = Math.max(most, fold.retainedBytes);
    }
    expect(most).toBeLessThanOrEqual(size >= frames.length ? frames.length : FOLD_BYTES + size);
    // what a stream's record says of the same bytes (sent-so-far.ts), [DONE] aside
    const record = new SentRecord();
    record.record(frames);
    expect(fold.summary()).toEqual(record.summary());
    const answer = fold.answer()!;
    const choice = (answer.choices as Array<Record<string, unknown>>)[0]!;
    expect(choice.message).toEqual({ role: 'assistant', content: text });
    expect((choice.logprobs as { content: unknown[] }).content).toHaveLength(TOKENS / 1000);
    expect(choice.finish_reason).toBe('length');
    expect(answer.usage).toEqual(USAGE);
    expect(fold.retainedBytes).toBe(0);
  });

  it('a migratable non-stream request with streamed legs keeps its answer in a fold, not every frame', () => {
    const client = {
      kind: 'chat',
      stream: false,
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: TOKENS },
    } as unknown as ClientRequest;
    const m = new Migration(client, 1, {} as RequestObserver, 'stream');
    expect(m.assembles).toBe(true);
    for (let at = 0; at < frames.length; at += 4096) m.sent.record(frames.subarray(at, at + 4096));
    expect(m.sent.retainedBytes).toBeLessThanOrEqual(FOLD_BYTES + 4096);
    expect(m.sent.summary().tokens).toBe(TOKENS);
  });
});
