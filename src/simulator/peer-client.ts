import { Agent } from 'undici';

export interface PeerResponse {
  status: number;
  body: unknown;
}

/**
 * Simulator → simulator (and → metaserver) HTTP calls through one undici Agent (a Pool per origin).
 * Connection errors and timeouts reject with an Error whose message names the target.
 */
export class PeerClient {
  private readonly agent = new Agent({ connections: 32, keepAliveTimeout: 10_000 });

  async postJson(
    url: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
    headers: Record<string, string> = {},
  ): Promise<PeerResponse> {
    const u = new URL(url);
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => ctl.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await this.agent.request({
        origin: u.origin,
        path: u.pathname + u.search,
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: ctl.signal,
      });
      const text = await res.body.text();
      let parsed: unknown = text;
      try {
        parsed = text.length > 0 ? JSON.parse(text) : null;
      } catch {
        // keep text
      }
      return { status: res.statusCode, body: parsed };
    } catch (err) {
      if (signal?.aborted) throw err;
      const reason = ctl.signal.aborted
        ? String((ctl.signal.reason as Error).message)
        : (err as Error).message;
      const code = (err as { code?: string }).code;
      throw new Error(`${url}: ${code ? code + ' ' : ''}${reason}`);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** `message` from an OpenAI-style error body, or the body itself. */
export function errorMessageOf(body: unknown): string {
  if (typeof body === 'object' && body !== null && 'error' in body) {
    const e = (body as { error: unknown }).error;
    if (typeof e === 'object' && e !== null && 'message' in e)
      return String((e as { message: unknown }).message);
    return String(e);
  }
  return typeof body === 'string' ? body : JSON.stringify(body);
}
