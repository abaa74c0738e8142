import { describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../../../test/fixtures/engines/load.js';
import { isRecomputed } from './recompute.js';
import { SseRelay } from '../relay/sse-relay.js';

const sse = (frames: readonly unknown[]): Buffer[] =>
  frames.map((f) => Buffer.from(`data: ${String(f)}\n\n`));
const tok = (content: string) =>
  JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: null }] });

describe('recompute detection in the SSE relay', () => {
  it.each([
    [
      'v0.13: the frame repeating the last token is dropped',
      'vllm-ascend/recompute-v0.13/decode-stream.recomputed.chat.json',
    ],
    ['v0.15: the empty frame is dropped', 'vllm-ascend/recompute-v0.15/decode-stream.recomputed.chat.json'],
  ])('%s', (_n, path) => {
    const relay = new SseRelay({ cachedTokens: null, stripTokenIds: true });
    const out = sse(loadEngineFixture(path).frames!).map((c) => relay.push(c));
    expect(relay.recomputed).toBe(true);
    const text = Buffer.concat(out.filter((b): b is Buffer => b !== null)).toString();
    expect(text.match(/Hello/g)).toHaveLength(1);
    expect(text).not.toContain('recomputed');
  });

  it.each([
    ['a token whose text is the word', [tok('recomputed')], false],
    ['a token whose text quotes it', [tok('"recomputed"')], false],
    ['plain tokens pass as the same buffer', [tok('a')], false],
  ])('%s: not a recompute', (_n, frames, want) => {
    const relay = new SseRelay({ cachedTokens: null, stripTokenIds: true });
    const [chunk] = sse(frames);
    const out = relay.push(chunk!);
    expect(relay.recomputed).toBe(want);
    expect(out?.toString()).toBe(chunk!.toString());
  });
});

describe('isRecomputed', () => {
  it.each<[string, Record<string, unknown>, boolean]>([
    ['stop_reason recomputed', { choices: [{ index: 0, stop_reason: 'recomputed' }] }, true],
    ['another stop_reason', { choices: [{ index: 0, stop_reason: 'x' }] }, false],
    ['no choices', { usage: {} }, false],
    ['the word in content', { choices: [{ index: 0, delta: { content: 'recomputed' } }] }, false],
  ])('%s', (_n, obj, want) => {
    expect(isRecomputed(obj)).toBe(want);
  });
});
