import type { EngineReply, LegCall } from './dispatch-harness.js';

/**
 * Test support for in-flight migration (issue 16): a fake chat engine whose answer is a function of
 * the context (the words after a partial assistant message are the rest of the same answer), which
 * can die after N tokens in every way a new attempt can fix.
 */

export const WORDS = ['Once', ' upon', ' a', ' time', ' there', ' was', ' a', ' river'];
export const ANSWER = WORDS.join('');

/** How a fake engine ends its stream after `dieAfter` tokens. */
export type Death = 'reset' | 'truncate' | 'recomputed' | 'idle';

/** The answer a context-deterministic engine gives to `call`, as SSE frames (ended as `death` says). */
export function wordsEngine(call: LegCall, death: Death | null, dieAfter: number): EngineReply {
  const b = call.body;
  const msgs = b.messages as Array<{ role: string; content: string }>;
  const last = msgs[msgs.length - 1]!;
  const partial = b.continue_final_message === true ? last.content : '';
  let k = 0;
  while (WORDS.slice(0, k).join('') !== partial) k++;
  const max = typeof b.max_tokens === 'number' ? b.max_tokens : 100;
  const id = `chatcmpl-${String(call.headers['x-request-id'])}`;
  if (b.stream !== true)
    return jsonAnswer(id, k, max, death !== null && Math.min(max, WORDS.length - k) > dieAfter);
  const chunk = (choice: object, extra: object = {}) =>
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: 100 + k,
      model: 'm',
      choices: [choice],
      ...extra,
    });
  const frames = [chunk({ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null })];
  const out = WORDS.slice(k, k + max);
  out.forEach((w, i) => {
    if (death !== null && i >= dieAfter) return;
    frames.push(chunk({ index: 0, delta: { content: w }, finish_reason: null }));
  });
  if (death !== null && out.length > dieAfter) {
    if (death === 'recomputed')
      frames.push(
        chunk({ index: 0, delta: { content: '' }, finish_reason: 'stop', stop_reason: 'recomputed' }),
      );
    const end =
      death === 'reset' ? 'error' : death === 'idle' || death === 'recomputed' ? 'hang' : 'truncate';
    return { kind: 'sse', frames, end: death === 'recomputed' ? 'done' : end };
  }
  const finish = k + max >= WORDS.length ? 'stop' : 'length';
  frames.push(chunk({ index: 0, delta: {}, finish_reason: finish }));
  const promptTokens = 5 + k;
  frames.push(
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: 100 + k,
      model: 'm',
      choices: [],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: out.length,
        total_tokens: promptTokens + out.length,
      },
    }),
  );
  return { kind: 'sse', frames };
}

/** The non-stream answer (vLLM's shape for these keys); a leg that would die answers nothing. */
function jsonAnswer(id: string, k: number, max: number, dies: boolean): EngineReply {
  if (dies) return { kind: 'refuse' };
  const out = WORDS.slice(k, k + max);
  const promptTokens = 5 + k;
  return {
    kind: 'json',
    body: {
      id,
      object: 'chat.completion',
      created: 100 + k,
      model: 'm',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: out.join('') },
          logprobs: null,
          finish_reason: k + max >= WORDS.length ? 'stop' : 'length',
          stop_reason: null,
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: out.length,
        total_tokens: promptTokens + out.length,
      },
    },
  };
}
