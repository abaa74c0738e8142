import { describe, expect, it } from 'vitest';
import { continuationBody, staticRefusal } from './continuation-body.js';
import { SentRecord, type SentSummary } from './sent-so-far.js';
import { StreamSeam, stopStrings } from './stream-seam.js';

/** Unit tables for the migration pieces: what was sent, the continuation body, the seam. */

const sent = (over: Partial<SentSummary> = {}): SentSummary => ({
  id: 'chatcmpl-1',
  created: 7,
  text: ' a b',
  tokens: 2,
  tokenIds: null,
  finished: false,
  unresumable: null,
  ...over,
});

const frames = (...objs: object[]): Buffer =>
  Buffer.from(objs.map((o) => `data: ${JSON.stringify(o)}\n\n`).join(''));

describe('SentRecord', () => {
  it('summarises chat and completion frames, token ids when every frame had them', () => {
    const r = new SentRecord();
    r.record(
      frames({ id: 'x', created: 3, choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] }),
    );
    r.record(frames({ id: 'x', choices: [{ index: 0, delta: { content: ' a' }, token_ids: [5] }] }));
    r.record(frames({ id: 'x', choices: [{ index: 0, delta: { content: ' b' }, token_ids: [6, 7] }] }));
    expect(r.summary()).toMatchObject({ id: 'x', created: 3, text: ' a b', tokens: 3, tokenIds: [5, 6, 7] });
    const c = new SentRecord();
    c.record(
      frames(
        { id: 'y', choices: [{ index: 0, text: 'p' }] },
        { id: 'y', choices: [{ index: 0, text: 'q' }] },
      ),
    );
    expect(c.summary()).toMatchObject({ text: 'pq', tokens: 2, tokenIds: null });
  });

  it.each([
    ['tool calls', { delta: { tool_calls: [{ index: 0 }] } }],
    ['reasoning output', { delta: { reasoning_content: 'hm' } }],
    ['several choices', { index: 1, delta: { content: 'x' } }],
  ])('%s → unresumable', (why, choice) => {
    const r = new SentRecord();
    r.record(frames({ id: 'x', choices: [{ index: 0, ...choice }] }));
    expect(r.summary().unresumable).toBe(why);
  });
});

describe('staticRefusal', () => {
  it.each([
    [{}, null],
    [{ n: 1 }, null],
    [{ n: 2 }, 'n > 1'],
    [{ response_format: { type: 'text' } }, null],
    [{ response_format: { type: 'json_schema' } }, 'response_format'],
    [{ guided_regex: 'a+' }, 'guided_regex'],
    [{ structured_outputs: { json: {} } }, 'structured_outputs'],
    [{ tools: [{}] }, 'tools'],
    [{ tools: [{}], tool_choice: 'none' }, null],
    [{ stream_options: { continuous_usage_stats: true } }, 'continuous_usage_stats'],
    [{ prompt_logprobs: 1 }, 'prompt_logprobs'],
  ])('chat %j → %s', (body, want) => {
    expect(staticRefusal('chat', body)).toBe(want);
  });
  it.each([
    [{ prompt: 'x', echo: true }, 'echo'],
    [{ prompt: 'x', suffix: 's' }, 'suffix'],
    [{ prompt: ['x', 'y'] }, 'several prompts'],
    [{ prompt: [1, 2, 3] }, null],
  ])('completion %j → %s', (body, want) => {
    expect(staticRefusal('completion', body)).toBe(want);
  });
});

describe('continuationBody', () => {
  const user = [{ role: 'user', content: 'hi' }];
  it.each([
    [
      'chat: an assistant message with the partial content, the continuation switches',
      'chat' as const,
      { messages: user, max_tokens: 10, min_tokens: 1 },
      sent(),
      {
        messages: [...user, { role: 'assistant', content: ' a b' }],
        continue_final_message: true,
        add_generation_prompt: false,
        max_tokens: 8,
        min_tokens: 0,
      },
    ],
    [
      "chat: the client's own prefill continues",
      'chat' as const,
      {
        messages: [...user, { role: 'assistant', content: 'Sure:' }],
        continue_final_message: true,
        add_generation_prompt: false,
      },
      sent(),
      { messages: [...user, { role: 'assistant', content: 'Sure: a b' }] },
    ],
    [
      'completion: prompt + text',
      'completion' as const,
      { prompt: 'Once', max_completion_tokens: 5 },
      sent(),
      { prompt: 'Once a b', max_completion_tokens: 3 },
    ],
    [
      'completion: token-id prompt + output ids (exact)',
      'completion' as const,
      { prompt: [[1, 2]] },
      sent({ tokenIds: [3, 4] }),
      { prompt: [1, 2, 3, 4] },
    ],
  ])('%s', (_n, kind, body, s, want) => {
    const c = continuationBody(kind, body, s);
    expect(c.kind).toBe('body');
    expect(c.kind === 'body' && c.body).toMatchObject(want);
  });

  it.each([
    ['max_tokens already reached', { messages: user, max_tokens: 2 }, sent(), 'complete'],
    ['token-id prompt without ids', { prompt: [1, 2] }, sent(), 'refused'],
    ['unresumable output', { messages: user }, sent({ unresumable: 'tool calls' }), 'refused'],
  ])('%s → %s', (_n, body, s, kind) => {
    expect(continuationBody('messages' in body ? 'chat' : 'completion', body, s).kind).toBe(kind);
  });
});

describe('StreamSeam', () => {
  const chunk = (choice: object, extra: object = {}) => ({
    id: 'chatcmpl-2',
    created: 9,
    choices: [choice],
    ...extra,
  });
  const out = (seam: StreamSeam, ...objs: object[]) => {
    const b = seam.rewrite(frames(...objs));
    return b === null
      ? []
      : b
          .toString()
          .split('\n\n')
          .filter(Boolean)
          .map((f) => JSON.parse(f.slice(6)));
  };

  it('keeps the first id and created, drops the repeated role frame, reports usage for the whole answer', () => {
    const seam = new StreamSeam(sent(), []);
    const got = out(
      seam,
      chunk({ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }),
      chunk({ index: 0, delta: { content: ' c' }, finish_reason: null }),
      chunk({ index: 0, delta: {}, finish_reason: 'stop' }),
      {
        id: 'chatcmpl-2',
        created: 9,
        choices: [],
        usage: {
          prompt_tokens: 7,
          completion_tokens: 1,
          total_tokens: 8,
          prompt_tokens_details: { cached_tokens: 7 },
        },
      },
    );
    expect(got).toHaveLength(3);
    expect(got.every((f) => f.id === 'chatcmpl-1' && f.created === 7)).toBe(true);
    expect(got[0].choices[0].delta).toEqual({ content: ' c' });
    expect(got[2].usage).toEqual({
      prompt_tokens: 5,
      completion_tokens: 3,
      total_tokens: 8,
      prompt_tokens_details: { cached_tokens: 5 },
    });
  });

  it.each([
    // sent text, stops, new frames' text → client text after the seam, finish
    ['end of sent: " a b", stop "b c" split across the seam', ['b c'], [' c', ' d'], '', 'stop'],
    ['a stop wholly in the new text is the engine’s', ['c d'], [' c', ' d'], ' c d', null],
    ['no stop strings', [], [' c'], ' c', null],
  ])('%s', (_n, stops, texts, want, finish) => {
    const seam = new StreamSeam(sent(), stops);
    const got = out(
      seam,
      ...texts.map((t) => chunk({ index: 0, delta: { content: t }, finish_reason: null })),
    );
    expect(got.map((f) => f.choices[0]?.delta.content ?? '').join('')).toBe(want);
    expect(got.at(-1)?.choices[0]?.finish_reason ?? null).toBe(finish);
    expect(seam.ended).toBe(finish !== null);
  });

  it('stopStrings reads a string or a list', () => {
    expect(stopStrings({ stop: 'x' })).toEqual(['x']);
    expect(stopStrings({ stop: ['x', '', 3] })).toEqual(['x']);
    expect(stopStrings({})).toEqual([]);
  });
});
