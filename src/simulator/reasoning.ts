import type { GenRequest } from './request-body.js';

/** Reasoning parsers the simulator imitates (`--reasoning-parser`, as vLLM and SGLang name them). */
export const REASONING_PARSERS = ['qwen3', 'deepseek_r1'] as const;
export type ReasoningParser = (typeof REASONING_PARSERS)[number];

/**
 * Whether a request's answer begins with reasoning text. Only chat answers have a reasoning part
 * (vLLM's and SGLang's reasoning parsers run in the chat server only), and only with a parser:
 * - `qwen3` (Qwen3 semantics): on unless `chat_template_kwargs.enable_thinking` is false — Qwen3's
 *   template then opens no think block and the parser returns everything as content
 *   (vllm/reasoning/qwen3_reasoning_parser.py Qwen3ReasoningParser; SGLang
 *   python/sglang/srt/parser/reasoning_parser.py Qwen3Detector);
 * - `deepseek_r1`: always on (the model always thinks first; DeepSeekR1ReasoningParser).
 */
export function thinkingOn(parser: ReasoningParser | null, g: GenRequest): boolean {
  if (parser === null || g.kind !== 'chat') return false;
  if (parser === 'deepseek_r1') return true;
  return g.enableThinking !== false;
}
