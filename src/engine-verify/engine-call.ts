import { request } from 'undici';
import { stringifyWithBigInt } from '../common/json-bigint.js';

/** One engine endpoint as `motor verify` reaches it: base URL and the configured key (or none). */
export interface EngineEndpoint {
  url: string;
  apiKey: string | null;
}

export interface CallResult {
  status: number;
  text: string;
  json: Record<string, unknown> | null;
}

/**
 * One bounded HTTP call to an engine: the key as `Authorization: Bearer` (as Motor's legs send it),
 * the body serialised with bigints kept exact (SGLang's 63-bit rooms). Transport errors throw.
 */
export async function engineCall(
  to: EngineEndpoint,
  method: 'GET' | 'POST',
  path: string,
  opts: { body?: unknown; headers?: Record<string, string>; timeoutMs: number; withKey?: boolean },
): Promise<CallResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if ((opts.withKey ?? true) && to.apiKey !== null) headers.authorization = `Bearer ${to.apiKey}`;
  const res = await request(to.url.replace(/\/+$/, '') + path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : stringifyWithBigInt(opts.body),
    signal: AbortSignal.timeout(Math.max(1, opts.timeoutMs)),
  });
  const text = await res.body.text();
  let json: Record<string, unknown> | null = null;
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) json = v as Record<string, unknown>;
  } catch {
    // not JSON: callers report the status and the start of the text
  }
  return { status: res.statusCode, text, json };
}

/** One line for a failed call: the status and the start of the answer, or the transport error. */
export function callError(what: string, r: CallResult): string {
  return `${what} answered ${r.status}: ${r.text.slice(0, 160).replace(/\s+/g, ' ')}`;
}

export function transportError(what: string, err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string } };
  return `${what}: ${e.cause?.message ?? e.message ?? String(err)}`;
}
