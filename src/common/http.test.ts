import { describe, expect, it } from 'vitest';
import { errorTypeForStatus, openAiError, parseJson } from './http.js';

describe('errorTypeForStatus', () => {
  it.each([
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [404, 'not_found_error'],
    [429, 'rate_limit_error'],
    [503, 'server_error'],
  ])('%i → %s', (status, type) => expect(errorTypeForStatus(status)).toBe(type));
});

describe('parseJson', () => {
  it.each([
    ['{"a":1}', true],
    ['{"a":', false],
    ['', false],
  ])('%j ok=%s', (text, ok) => expect(parseJson(Buffer.from(text)).ok).toBe(ok));
});

it('openAiError has the OpenAI shape', () => {
  expect(openAiError('bad', 'invalid_request_error', 'model')).toEqual({
    error: { message: 'bad', type: 'invalid_request_error', param: 'model', code: null },
  });
});
