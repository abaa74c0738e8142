import { describe, expect, it } from 'vitest';
import { attemptIdRewrite, withClientRequestId } from './client-request-id.js';

describe('one request id for the client (issue 18 item 8)', () => {
  const rw = attemptIdRewrite('r1', 'r1#a12');
  it.each([
    [
      'chat body',
      '{"id":"chatcmpl-r1#a12","object":"chat.completion"}',
      '{"id":"chatcmpl-r1","object":"chat.completion"}',
    ],
    ['completions body', '{"id":"cmpl-r1#a12","choices":[]}', '{"id":"cmpl-r1","choices":[]}'],
    [
      'two frames in one chunk',
      'data: {"id":"chatcmpl-r1#a12","x":1}\n\ndata: {"id":"chatcmpl-r1#a12","x":2}\n\n',
      'data: {"id":"chatcmpl-r1","x":1}\n\ndata: {"id":"chatcmpl-r1","x":2}\n\n',
    ],
    ['another attempt untouched', '{"id":"chatcmpl-r1#a1"}', '{"id":"chatcmpl-r1#a1"}'],
    [
      'text that merely contains it',
      '{"content":"r1#a12 and \\"r1#a12\\""}',
      '{"content":"r1#a12 and \\"r1#a12\\""}',
    ],
    ['no id at all', 'data: {"choices":[]}\n\n', 'data: {"choices":[]}\n\n'],
  ])('%s', (_what, input, expected) => {
    expect(withClientRequestId(Buffer.from(input), rw).toString()).toBe(expected);
  });

  it('returns the same Buffer when there is nothing to cut, and leaves bytes past the view alone', () => {
    const buf = Buffer.from('{"id":"x"}');
    expect(withClientRequestId(buf, rw)).toBe(buf);
    const whole = Buffer.from('{"id":"r1#a12"}TAIL');
    withClientRequestId(whole.subarray(0, 15), rw);
    expect(whole.subarray(15).toString()).toBe('TAIL');
  });

  it('needs no rewrite when the engine id is the root id', () => {
    expect(attemptIdRewrite('r1', 'r1')).toBeNull();
  });
});
