import { describe, expect, it } from 'vitest';
import { normalizeResponseBody, SseNormalizer } from './client-response.js';

const chat = { route: 'chat' as const, returnTokenIds: false };

describe('normalizeResponseBody', () => {
  it.each([
    [
      'drops kv_transfer_params and token ids',
      chat,
      {
        id: 'x',
        kv_transfer_params: { a: 1 },
        prompt_token_ids: [1],
        choices: [{ message: {}, token_ids: [2] }],
      },
      { id: 'x', choices: [{ message: {} }] },
    ],
    [
      'keeps token ids when asked',
      { route: 'completion' as const, returnTokenIds: true },
      { prompt_token_ids: [1], choices: [{ text: 'a', token_ids: [2] }] },
      { prompt_token_ids: [1], choices: [{ text: 'a', token_ids: [2] }] },
    ],
    [
      'reshapes text choices for chat clients',
      chat,
      { object: 'text_completion', choices: [{ index: 0, text: 'hi', finish_reason: 'stop' }] },
      {
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      },
    ],
  ])('%s', (_name, opts, input, expected) => {
    const out = normalizeResponseBody(Buffer.from(JSON.stringify(input)), opts);
    expect(JSON.parse(out.toString())).toEqual(expected);
  });

  it('returns the same bytes when nothing needs changing', () => {
    const raw = Buffer.from('{"id":"x","choices":[{"message":{"content":"a"}}]}');
    expect(normalizeResponseBody(raw, chat)).toBe(raw);
  });
});

describe('SseNormalizer', () => {
  it('normalises frames split across chunks and leaves [DONE] alone', () => {
    const n = new SseNormalizer(chat);
    const stream =
      'data: {"choices":[{"delta":{"content":"a"},"token_ids":[5]}]}\n\n' +
      'data: {"choices":[{"text":"b"}],"kv_transfer_params":null}\n\n' +
      'data: [DONE]\n\n';
    let out = '';
    for (let i = 0; i < stream.length; i += 7) out += n.push(stream.slice(i, i + 7));
    out += n.flush();
    expect(out).toBe(
      'data: {"choices":[{"delta":{"content":"a"}}]}\n\n' +
        'data: {"choices":[{"delta":{"content":"b"}}]}\n\n' +
        'data: [DONE]\n\n',
    );
  });

  it('passes untouched frames byte for byte', () => {
    const n = new SseNormalizer(chat);
    const frame = 'data: {"choices":[{"delta":{"content":"\\"text\\": x"}}]}\n\n';
    expect(n.push(frame)).toBe(frame);
  });

  it('keeps a multi-byte character split across byte chunks whole', () => {
    const n = new SseNormalizer(chat);
    const bytes = Buffer.from('data: {"choices":[{"delta":{"content":"é😀"}}]}\n\n');
    let out = '';
    for (let i = 0; i < bytes.length; i += 1) out += n.push(bytes.subarray(i, i + 1));
    out += n.flush();
    expect(out).toBe(bytes.toString('utf8'));
  });
});
