import { CHARS_PER_TOKEN } from '../../scheduling/index.js';
import type { ClientRequest } from '../internal-request/client-request.js';

/** What prefix hashing sees of one request: rendered text (chat template applied) or token ids. */
export interface RenderedPrompt {
  /**
   * The rendered text; a chat conversation's as the pieces whose concatenation it is (the parsed
   * message strings themselves, no flattened copy of a long conversation: issue 19).
   */
  readonly text?: string | readonly string[];
  readonly tokenIds?: readonly number[];
  /** Estimated prompt length in tokens (token ids, else characters / {@link CHARS_PER_TOKEN}). */
  readonly tokens: number;
}

/** Appends the text of one message's `content` to `out`; returns the number of characters appended. */
function pushContent(out: string[], content: unknown): number {
  if (typeof content === 'string') return push(out, content);
  if (content === null || content === undefined) return 0;
  if (Array.isArray(content)) {
    let n = 0;
    for (const part of content) {
      const p = part as { type?: unknown; text?: unknown };
      n += push(
        out,
        p !== null && typeof p === 'object' && typeof p.text === 'string' ? p.text : JSON.stringify(part),
      );
    }
    return n;
  }
  return push(out, JSON.stringify(content));
}

function push(out: string[], piece: string): number {
  out.push(piece);
  return piece.length;
}

/**
 * Renders the whole conversation with one fixed template (`<|role|>\ncontent\n` per message; tool
 * calls and names included), so a conversation's next turn extends the previous turn's rendering and
 * shares its prefix blocks. Not the engine's template: prefix affinity needs only the same rendering
 * for every request. Chat: the rendering as pieces (`textBlockHashes` reads them in order).
 * Completions: the prompt text, or its token ids. Called once per client request.
 */
export function renderPrompt(client: Pick<ClientRequest, 'kind' | 'body'>): RenderedPrompt {
  const { body } = client;
  if (client.kind === 'chat') {
    const parts: string[] = [];
    let length = 0;
    for (const m of body.messages as Array<Record<string, unknown>>) {
      length += push(parts, `<|${String(m.role)}|>${typeof m.name === 'string' ? `(${m.name})` : ''}\n`);
      length += pushContent(parts, m.content);
      length += push(parts, m.tool_calls !== undefined ? `\n${JSON.stringify(m.tool_calls)}\n` : '\n');
    }
    return { text: parts, tokens: Math.ceil(length / CHARS_PER_TOKEN) };
  }
  const p = body.prompt;
  if (typeof p === 'string') return { text: p, tokens: Math.ceil(p.length / CHARS_PER_TOKEN) };
  if (Array.isArray(p) && p.every((x) => typeof x === 'number'))
    return { tokenIds: p as number[], tokens: p.length };
  if (Array.isArray(p) && p.every(Array.isArray)) {
    const ids = (p as number[][]).flat();
    return { tokenIds: ids, tokens: ids.length };
  }
  const text = Array.isArray(p) ? p.map(String).join('\n') : '';
  return { text, tokens: Math.ceil(text.length / CHARS_PER_TOKEN) };
}
