import { CHARS_PER_TOKEN } from '../scheduling/index.js';
import type { ClientRequest } from './client-request.js';

/** What prefix hashing sees of one request: rendered text (chat template applied) or token ids. */
export interface RenderedPrompt {
  readonly text?: string;
  readonly tokenIds?: readonly number[];
  /** Estimated prompt length in tokens (token ids, else characters / {@link CHARS_PER_TOKEN}). */
  readonly tokens: number;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    let out = '';
    for (const part of content) {
      const p = part as { type?: unknown; text?: unknown };
      out +=
        p !== null && typeof p === 'object' && typeof p.text === 'string' ? p.text : JSON.stringify(part);
    }
    return out;
  }
  return JSON.stringify(content);
}

/**
 * Renders the whole conversation with one fixed template (`<|role|>\ncontent\n` per message; tool
 * calls and names included), so a conversation's next turn extends the previous turn's rendering and
 * shares its prefix blocks. Not the engine's template: prefix affinity needs only the same rendering
 * for every request. Completions: the prompt text, or its token ids. Called once per client request.
 */
export function renderPrompt(client: Pick<ClientRequest, 'kind' | 'body'>): RenderedPrompt {
  const { body } = client;
  if (client.kind === 'chat') {
    let text = '';
    for (const m of body.messages as Array<Record<string, unknown>>) {
      text += `<|${String(m.role)}|>`;
      if (typeof m.name === 'string') text += `(${m.name})`;
      text += `\n${contentText(m.content)}`;
      if (m.tool_calls !== undefined) text += `\n${JSON.stringify(m.tool_calls)}`;
      text += '\n';
    }
    return { text, tokens: Math.ceil(text.length / CHARS_PER_TOKEN) };
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
