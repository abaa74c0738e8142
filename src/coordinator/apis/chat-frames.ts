import { isPlainObject } from '../../common/http.js';

/** One chat-completions stream chunk (`chat.completion.chunk`), as the fields the API front-ends read. */
export interface ChatChunk {
  choices?: ChatChoice[];
  usage?: ChatUsage | null;
  /** An engine's error frame (`data: {"error":{…}}`) relayed by the pipeline. */
  error?: { message?: unknown; type?: unknown };
}

export interface ChatChoice {
  index?: number;
  delta?: ChatDelta;
  message?: ChatDelta;
  finish_reason?: string | null;
  /** vLLM: the stop string (or token id) that ended the answer (`CompletionOutput.stop_reason`). */
  stop_reason?: string | number | null;
}

export interface ChatDelta {
  content?: string | null;
  /** vLLM ≥ 0.10 names it `reasoning`; older vLLM and SGLang `reasoning_content`. */
  reasoning?: string | null;
  reasoning_content?: string | null;
  tool_calls?: ChatToolCallDelta[] | null;
}

export interface ChatToolCallDelta {
  index?: number;
  id?: string | null;
  function?: { name?: string | null; arguments?: string | null };
}

export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

export const reasoningOf = (d: ChatDelta): string | null | undefined => d.reasoning ?? d.reasoning_content;

const SEP = '\n\n';
const DATA = 'data:';

/**
 * Splits the pipeline's chat SSE bytes into parsed chunks. The pipeline writes whole frames, but a frame
 * may still be split across writes (an engine chunk boundary), so the unfinished tail is kept. Each
 * frame is one small `JSON.parse` — the only per-token parse on these APIs.
 */
export class ChatFrameReader {
  private carry = '';

  /** Calls `onChunk` per complete `data:` frame (not `[DONE]`), in order. */
  push(bytes: Buffer | string, onChunk: (chunk: ChatChunk) => void): void {
    let text = this.carry === '' ? String(bytes) : this.carry + String(bytes);
    let start = 0;
    for (;;) {
      const end = text.indexOf(SEP, start);
      if (end < 0) break;
      const frame = text.slice(start, end);
      start = end + SEP.length;
      const chunk = parseFrame(frame);
      if (chunk !== null) onChunk(chunk);
    }
    text = text.slice(start);
    this.carry = text;
  }
}

function parseFrame(frame: string): ChatChunk | null {
  // a frame may carry comment or event lines; the chat stream's payload is its one `data:` line
  for (const line of frame.split('\n')) {
    if (!line.startsWith(DATA)) continue;
    const payload = line.slice(DATA.length).trim();
    if (payload === '[DONE]' || payload === '') return null;
    try {
      const obj: unknown = JSON.parse(payload);
      return isPlainObject(obj) ? (obj as ChatChunk) : null;
    } catch {
      return null;
    }
  }
  return null;
}
