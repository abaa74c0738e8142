import { describe, expect, it } from 'vitest';
import { SseParser } from './sse-parser.js';

const chunk = (content: string | null, extra = ''): string =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{${
    content === null ? '' : `"content":${JSON.stringify(content)}`
  }},"finish_reason":null}]${extra}}\n\n`;
const roleChunk =
  'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n';
const usageChunk =
  'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":13,"total_tokens":17,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":8}}}\n\n';
const DONE = 'data: [DONE]\n\n';
const STREAM = roleChunk + chunk(' a') + chunk(' b') + chunk(' c') + chunk(' d') + usageChunk + DONE;

function feed(parts: string[], gaps?: number[]): SseParser {
  const p = new SseParser(gaps ? (g) => gaps.push(g) : undefined);
  parts.forEach((part, i) => p.push(Buffer.from(part), i * 10));
  return p;
}

describe('SseParser', () => {
  it('reads content chunks, usage and [DONE] from a whole stream', () => {
    const p = feed([STREAM]);
    expect(p.contentChunks).toBe(4);
    expect(p.done).toBe(true);
    expect(p.errorMessage).toBeNull();
    expect(p.usage).toEqual({ promptTokens: 13, completionTokens: 4, cachedTokens: 8 });
    expect(p.pendingBytes).toBe(0);
  });

  it('gives the same result however the bytes are split (every split point, and byte by byte)', () => {
    const bytes = Buffer.from(STREAM);
    for (let cut = 1; cut < bytes.length; cut++) {
      const p = new SseParser();
      p.push(bytes.subarray(0, cut), 0);
      p.push(bytes.subarray(cut), 1);
      expect([p.contentChunks, p.done, p.usage?.cachedTokens], `cut at ${cut}`).toEqual([4, true, 8]);
    }
    const p = new SseParser();
    for (let i = 0; i < bytes.length; i++) p.push(bytes.subarray(i, i + 1), i);
    expect([p.contentChunks, p.done, p.usage?.completionTokens]).toEqual([4, true, 4]);
  });

  it('times the first content chunk and reports the gaps between content chunks', () => {
    const gaps: number[] = [];
    // role chunk at t=0 (not content), then content at 10, 20, 30 (two frames in one piece), usage+done at 40
    const p = feed([roleChunk, chunk('x'), chunk('y'), chunk('z') + chunk('w'), usageChunk + DONE], gaps);
    expect(p.firstContentMs).toBe(10);
    expect(p.lastContentMs).toBe(30);
    expect(gaps).toEqual([10, 10, 0]);
  });

  it('detects an SSE error frame (with or without spaces, object or string)', () => {
    for (const frame of [
      'data: {"error":{"message":"decode leg failed","type":"server_error","code":502}}\n\n',
      'data: {"error": {"message": "decode leg failed", "type": "server_error"}}\n\n',
      'data: {"error":"decode leg failed"}\n\n',
    ]) {
      const p = feed([roleChunk + chunk('a'), frame, DONE]);
      expect(p.errorMessage).toBe('decode leg failed');
      expect(p.contentChunks).toBe(1);
      expect(p.done).toBe(true);
    }
  });

  it('reports a missing [DONE] and a partial trailing frame', () => {
    const p = feed([roleChunk + chunk('a') + chunk('b'), 'data: {"id":"c1","choi']);
    expect(p.done).toBe(false);
    expect(p.contentChunks).toBe(2);
    expect(p.pendingBytes).toBeGreaterThan(0);
  });

  it('does not count empty, null or reasoning-only deltas, nor key-like text inside content', () => {
    const p = feed([
      'data: {"choices":[{"delta":{"content":null}}]}\n\n',
      'data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}\n\n',
      chunk('she said "content":"x" and "usage":{} and "error":{}'),
      chunk(null),
      DONE,
    ]);
    expect(p.contentChunks).toBe(1);
    expect(p.usage).toBeNull();
    expect(p.errorMessage).toBeNull();
  });

  it('accepts CRLF framing, spaces after colons, comments and event lines', () => {
    const text =
      ': keep-alive\r\n\r\n' +
      'event: message\r\ndata: {"choices": [{"delta": {"content": "hi"}}]}\r\n\r\n' +
      'data:{"choices":[{"delta":{"content":"there"}}],"usage": {"prompt_tokens": 3, "completion_tokens": 2}}\r\n\r\n' +
      'data: [DONE]\r\n\r\n';
    const p = feed([text.slice(0, 7), text.slice(7)]);
    expect(p.contentChunks).toBe(2);
    expect(p.usage).toEqual({ promptTokens: 3, completionTokens: 2, cachedTokens: 0 });
    expect(p.done).toBe(true);
  });

  it('ignores "usage":null on ordinary chunks', () => {
    const p = feed([chunk('a', ',"usage":null'), usageChunk, DONE]);
    expect(p.contentChunks).toBe(1);
    expect(p.usage?.promptTokens).toBe(13);
  });

  it('counts non-JSON payloads as malformed', () => {
    const p = feed(['data: hello\n\n', DONE]);
    expect(p.malformedFrames).toBe(1);
    expect(p.done).toBe(true);
  });
});
