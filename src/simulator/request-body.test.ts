import { describe, expect, it } from 'vitest';
import {
  checkContextLength,
  parseGenRequest,
  parseJsonPreservingRoom,
  RequestError,
} from './request-body.js';

const d = { defaultMaxTokens: 16 };

describe('parseJsonPreservingRoom', () => {
  it.each([
    ['{"bootstrap_room":9223372036854775807}', '9223372036854775807'],
    ['{"bootstrap_room": 9007199254740993 ,"x":1}', '9007199254740993'],
    ['{"bootstrap_room":42}', 42],
  ])('%s', (text, room) => {
    const r = parseJsonPreservingRoom(text);
    expect(r.ok && (r.value as { bootstrap_room: unknown }).bootstrap_room).toBe(room);
  });
});

describe('parseGenRequest', () => {
  it.each([
    [{ model: 'm', prompt: 'x', max_tokens: 0 }, 'max_tokens'],
    [{ model: 'm', prompt: 'x', n: 200 }, 'n'],
    [{ model: 'm', prompt: ['a', 'b'] }, 'prompt'],
    [{ model: 'm', prompt: 'x', stream_options: { include_usage: true } }, 'stream_options'],
    [{ model: 'm', prompt: 'x', stop: 5 }, 'stop'],
    [{ model: 'm', prompt: 'x', seed: 1.5 }, 'seed'],
    [{ model: 'm', prompt: 'x', kv_transfer_params: [] }, 'kv_transfer_params'],
    [{ model: 'm', prompt: 'x', bootstrap_room: 1 }, 'bootstrap_host'],
    [
      { model: 'm', prompt: 'x', bootstrap_room: 'abc', bootstrap_host: 'h', bootstrap_port: 1 },
      'bootstrap_room',
    ],
  ])('%j → 400 on %s', (body, param) => {
    try {
      parseGenRequest('completion', body, d);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(RequestError);
      expect((err as RequestError).param).toBe(param);
    }
  });

  it('reads the P/D and output fields', () => {
    const g = parseGenRequest(
      'chat',
      {
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
        max_completion_tokens: 3,
        rid: 'r1',
        bootstrap_host: 'h',
        bootstrap_port: 8998,
        bootstrap_room: '9223372036854775807',
        stream: true,
        stream_options: { include_usage: true },
      },
      d,
    );
    expect(g).toMatchObject({
      maxTokens: 3,
      naturalStop: false,
      bodyRequestId: 'r1',
      includeUsage: true,
      bootstrap: { host: 'h', port: 8998, room: '9223372036854775807' },
    });
  });
});

describe('chat continuation switches (issue 16)', () => {
  const msgs = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: ' the' },
  ];
  it('continue_final_message leaves the last message open, without a generation prompt', () => {
    const g = parseGenRequest(
      'chat',
      { model: 'm', messages: msgs, continue_final_message: true, add_generation_prompt: false },
      d,
    );
    expect(g.promptText).toBe('<|user|>hi\n<|assistant|>\n the');
  });
  it('continue_final_message with the default add_generation_prompt (true) is a 400, as in vLLM', () => {
    expect(() =>
      parseGenRequest('chat', { model: 'm', messages: msgs, continue_final_message: true }, d),
    ).toThrow(/continue_final_message/);
  });
});

describe('checkContextLength', () => {
  it.each([
    ['completion', 'x', 999, null],
    ['completion', 'x', 1000, 'prompt'],
    ['chat', 'x', 1000, 'messages'],
  ] as const)('%s prompt %j + max_tokens %d in 1000 → %s', (kind, text, maxTokens, param) => {
    const body =
      kind === 'chat'
        ? { model: 'm', messages: [{ role: 'user', content: text }], max_tokens: maxTokens }
        : { model: 'm', prompt: [7], max_tokens: maxTokens };
    const g = parseGenRequest(kind, body, d);
    if (kind === 'chat') g.promptIds = [7]; // the length counted is the final prompt's
    if (param === null) return expect(() => checkContextLength(g, 1000)).not.toThrow();
    try {
      checkContextLength(g, 1000);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(RequestError);
      expect((err as RequestError).param).toBe(param);
      expect((err as RequestError).message).toContain(
        '1001 tokens (1 in the messages, 1000 in the completion)',
      );
    }
  });
});
