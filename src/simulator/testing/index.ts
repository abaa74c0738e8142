import { request } from 'undici';

/** Small HTTP helpers for tests that drive a simulator (or anything in front of one). */
export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export async function http(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<HttpResult> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  const text = await res.body.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

export const post = (
  base: string,
  path: string,
  body: unknown,
  headers?: Record<string, string>,
): Promise<HttpResult> => http(base, 'POST', path, body, headers);

/** Splits an SSE body into its `data:` payloads (parsed JSON, or the string "[DONE]"). Throws on bad framing. */
export function sseEvents(text: string): unknown[] {
  if (!text.endsWith('\n\n')) throw new Error(`SSE body does not end with a blank line: ${text.slice(-80)}`);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((f) => {
      if (!f.startsWith('data: ')) throw new Error(`SSE frame without "data: ": ${f}`);
      const payload = f.slice(6);
      return payload === '[DONE]' ? payload : (JSON.parse(payload) as unknown);
    });
}

export interface LedgerSnapshot {
  in_flight: Array<{ id: string; state: string; flow: string }>;
  finished: Array<{
    id: string;
    outcome: string;
    reason: string | null;
    flow: string;
    output_tokens: number;
  }>;
  kv_held: Array<{ request_id: string; kind: string; blocks: number; expires_at_ms: number }>;
}

/** `/debug/requests` once nothing is in flight (or after `waitMs`). */
export async function idleLedger(base: string, waitMs = 10_000): Promise<LedgerSnapshot> {
  return (await http(base, 'GET', `/debug/requests?wait_idle_ms=${waitMs}`)).json as LedgerSnapshot;
}

export const chatBody = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: 'motor-sim-7b',
  messages: [{ role: 'user', content }],
  ...extra,
});
