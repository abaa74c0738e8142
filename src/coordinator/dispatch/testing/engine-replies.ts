import { buildPrefillResult, type PrefillResultInput } from '../../../protocol/index.js';
import type { EngineReply, LegCall } from './dispatch-harness.js';

/** Test support for the dispatch harness: the fake engines' common answers. */

export const json = (body: unknown, status = 200): EngineReply => ({ kind: 'json', status, body });

/** One chat stream chunk carrying `content`. */
export const delta = (content: string): string =>
  JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] });

export const COMPLETION = {
  id: 'c',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2 },
};

/** An engine proxy's answer to the prefill leg `call`: a completed PrefillResult for that leg's attempt. */
export function proxyPrefillReply(
  call: LegCall,
  fields: Partial<PrefillResultInput> & Pick<PrefillResultInput, 'handoff_mode'>,
): EngineReply {
  const d = call.body._motor_dispatch as {
    root_request_id: string;
    engine_request_id: string;
    pair_id: string;
    attempt_seq: number;
  };
  return json(
    buildPrefillResult({
      root_request_id: d.root_request_id,
      engine_request_id: d.engine_request_id,
      pair_id: d.pair_id,
      attempt_seq: d.attempt_seq,
      status: 'completed',
      ...fields,
    }),
  );
}
