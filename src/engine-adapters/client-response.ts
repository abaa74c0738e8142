/**
 * Client-facing normalisation of engine responses (conformance 24): no `kv_transfer_params`, no
 * token ids the client did not ask for (`return_token_ids`), and the chat shape for chat routes
 * (an engine that answers a chat request with completion-style `text` choices is reshaped).
 * Pure functions plus a streaming SSE transformer; shared by the engine proxy and the coordinator.
 */

import { ENGINE_RESPONSE_INTERNAL_FIELDS } from '../protocol/index.js';

export type ClientRoute = 'chat' | 'completion';

export interface NormalizeOptions {
  route: ClientRoute;
  /** The client sent `return_token_ids: true`: keep token ids. */
  returnTokenIds: boolean;
}

const TOKEN_ID_KEYS = ['prompt_token_ids', 'token_ids'] as const;
/** Quoted, as they appear as keys in a JSON text (the cheap pre-check before parsing). */
const INTERNAL_KEY_MARKS = ENGINE_RESPONSE_INTERNAL_FIELDS.map((key) => `"${key}"`);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Normalises one response object or stream chunk in place; returns whether it changed. */
export function normalizeResponseObject(
  body: Record<string, unknown>,
  opts: NormalizeOptions,
  chunk: boolean,
): boolean {
  let changed = false;
  for (const key of ENGINE_RESPONSE_INTERNAL_FIELDS) {
    if (key in body) {
      delete body[key];
      changed = true;
    }
  }
  if (!opts.returnTokenIds) {
    for (const key of TOKEN_ID_KEYS) {
      if (key in body) {
        delete body[key];
        changed = true;
      }
    }
  }
  const choices = body.choices;
  if (Array.isArray(choices)) {
    for (const choice of choices) {
      if (!isRecord(choice)) continue;
      if (!opts.returnTokenIds) {
        for (const key of TOKEN_ID_KEYS) {
          if (key in choice) {
            delete choice[key];
            changed = true;
          }
        }
      }
      for (const key of ENGINE_RESPONSE_INTERNAL_FIELDS) {
        if (key in choice) {
          delete choice[key];
          changed = true;
        }
      }
      if (opts.route === 'chat' && typeof choice.text === 'string') {
        const field = chunk ? 'delta' : 'message';
        if (!(field in choice)) {
          choice[field] = chunk ? { content: choice.text } : { role: 'assistant', content: choice.text };
          delete choice.text;
          changed = true;
        }
      }
    }
  }
  if (opts.route === 'chat' && changed && typeof body.object === 'string') {
    if (body.object === 'text_completion') {
      body.object = chunk ? 'chat.completion.chunk' : 'chat.completion';
    }
  }
  return changed;
}

/** Normalises a whole non-stream JSON response body; returns the bytes to send. */
export function normalizeResponseBody(raw: Buffer, opts: NormalizeOptions): Buffer {
  const text = raw.toString('utf8');
  if (!needsWork(text, opts)) return raw;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return raw;
  }
  if (!isRecord(parsed)) return raw;
  return normalizeResponseObject(parsed, opts, false) ? Buffer.from(JSON.stringify(parsed)) : raw;
}

function hasInternalKey(text: string): boolean {
  for (const mark of INTERNAL_KEY_MARKS) if (text.includes(mark)) return true;
  return false;
}

/** Cheap test on the raw text: re-parse only frames that may carry something to remove or reshape. */
function needsWork(text: string, opts: NormalizeOptions): boolean {
  return (
    hasInternalKey(text) ||
    (!opts.returnTokenIds && text.includes('token_ids"')) ||
    (opts.route === 'chat' && text.includes('"text":'))
  );
}

/**
 * Transforms an SSE byte stream event by event. Events are split on blank lines; `data:` payloads
 * other than `[DONE]` are normalised when they may need it, everything else passes unchanged.
 */
export class SseNormalizer {
  private pending = '';

  constructor(private readonly opts: NormalizeOptions) {}

  /** Feeds bytes; returns the complete, normalised events available so far. */
  push(chunk: Buffer | string): string {
    this.pending += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
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
    const rest = this.pending;
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
        if (!isRecord(parsed) || !normalizeResponseObject(parsed, this.opts, true)) return line;
        return `data: ${JSON.stringify(parsed)}`;
      })
      .join('\n');
  }
}
