/**
 * Client-facing normalisation of engine responses (conformance 24) on the engine proxy: the fields a
 * client must not get go (`stripClientForbiddenFields`, shared with the coordinator), and chat
 * routes get the chat shape (an engine that answers a chat request with completion-style `text`
 * choices is reshaped). Pure functions plus a streaming SSE transformer.
 */

import { StringDecoder } from 'node:string_decoder';
import { isPlainObject } from '../common/http.js';
import {
  mayCarryClientForbiddenFields,
  stripClientForbiddenFields,
  textMayCarryClientForbiddenFields,
} from './client-fields.js';

export type ClientRoute = 'chat' | 'completion';

export interface NormalizeOptions {
  route: ClientRoute;
  /** The client sent `return_token_ids: true`: keep token ids. */
  returnTokenIds: boolean;
}

/** Completion-style `text` choices become chat `message` (or `delta` in a chunk); returns whether any did. */
function reshapeTextChoices(body: Record<string, unknown>, chunk: boolean): boolean {
  const choices = body.choices;
  if (!Array.isArray(choices)) return false;
  let changed = false;
  const field = chunk ? 'delta' : 'message';
  for (const choice of choices) {
    if (!isPlainObject(choice) || typeof choice.text !== 'string' || field in choice) continue;
    choice[field] = chunk ? { content: choice.text } : { role: 'assistant', content: choice.text };
    delete choice.text;
    changed = true;
  }
  return changed;
}

/** Normalises one response object or stream chunk in place; returns whether it changed. */
export function normalizeResponseObject(
  body: Record<string, unknown>,
  opts: NormalizeOptions,
  chunk: boolean,
): boolean {
  let changed = stripClientForbiddenFields(body, 'proxy', !opts.returnTokenIds);
  if (opts.route !== 'chat') return changed;
  if (reshapeTextChoices(body, chunk)) changed = true;
  if (changed && body.object === 'text_completion') {
    body.object = chunk ? 'chat.completion.chunk' : 'chat.completion';
  }
  return changed;
}

const CHAT_TEXT_MARK = '"text":';
const CHAT_TEXT_MARK_BYTES = Buffer.from(CHAT_TEXT_MARK);

/** Normalises a whole non-stream JSON response body; returns the bytes to send. */
export function normalizeResponseBody(raw: Buffer, opts: NormalizeOptions): Buffer {
  const mayNeedWork =
    mayCarryClientForbiddenFields(raw, 'proxy', !opts.returnTokenIds) ||
    (opts.route === 'chat' && raw.includes(CHAT_TEXT_MARK_BYTES));
  if (!mayNeedWork) return raw;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    return raw;
  }
  if (!isPlainObject(parsed)) return raw;
  return normalizeResponseObject(parsed, opts, false) ? Buffer.from(JSON.stringify(parsed)) : raw;
}

/** Cheap test on the raw text: re-parse only frames that may carry something to remove or reshape. */
function needsWork(text: string, opts: NormalizeOptions): boolean {
  return (
    textMayCarryClientForbiddenFields(text, 'proxy', !opts.returnTokenIds) ||
    (opts.route === 'chat' && text.includes(CHAT_TEXT_MARK))
  );
}

/**
 * Transforms an SSE byte stream event by event. Events are split on blank lines; `data:` payloads
 * other than `[DONE]` are normalised when they may need it, everything else passes unchanged.
 */
export class SseNormalizer {
  private pending = '';
  // Holds a multi-byte character split across TCP chunks until its last byte arrives.
  private readonly decoder = new StringDecoder('utf8');

  constructor(private readonly opts: NormalizeOptions) {}

  /** Feeds bytes; returns the complete, normalised events available so far. */
  push(chunk: Buffer | string): string {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let out = '';
    for (;;) {
      const end = this.findEventEnd();
      if (end === null) break;
      const event = this.pending.slice(0, end.index);
      this.pending = this.pending.slice(end.index + end.length);
      out += this.transformEvent(event) + end.separator;
    }
    return out;
  }

  /** Returns whatever is left (an unterminated last event), normalised. */
  flush(): string {
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    return rest.length > 0 ? this.transformEvent(rest) : '';
  }

  private findEventEnd(): { index: number; length: number; separator: string } | null {
    const lf = this.pending.indexOf('\n\n');
    const crlf = this.pending.indexOf('\r\n\r\n');
    if (lf < 0 && crlf < 0) return null;
    if (crlf >= 0 && (lf < 0 || crlf < lf)) return { index: crlf, length: 4, separator: '\r\n\r\n' };
    return { index: lf, length: 2, separator: '\n\n' };
  }

  private transformEvent(event: string): string {
    if (!needsWork(event, this.opts)) return event;
    const lines = event.split(/\r?\n/);
    return lines
      .map((line) => {
        if (!line.startsWith('data:')) return line;
        const data = line.slice(5).trimStart();
        if (data === '[DONE]' || !needsWork(data, this.opts)) return line;
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          return line;
        }
        if (!isPlainObject(parsed) || !normalizeResponseObject(parsed, this.opts, true)) return line;
        return `data: ${JSON.stringify(parsed)}`;
      })
      .join('\n');
  }
}
