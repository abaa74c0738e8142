/**
 * The client sees one request id: Motor's `x-request-id` (the root request id). Each attempt's legs
 * carry an engine request id `<root>#a<seq>` (attempt.ts) and vLLM builds the response `id` from it
 * (`chatcmpl-<X-Request-Id>`, `cmpl-<X-Request-Id>`: engine-request-id.ts), so without a rewrite
 * the client's body says `chatcmpl-<root>#a1` while the header says `<root>`. The engine request ids
 * stay internal (engine logs, metaserver, stop calls); only the bytes to the client change.
 */

/** What one attempt's relay looks for: `<engine request id>"`, the end of a JSON string value. */
export interface AttemptIdRewrite {
  readonly needle: Buffer;
  /** Bytes of `#a<seq>` cut before the closing quote. */
  readonly suffixBytes: number;
}

/** The rewrite for one attempt (made once per attempt); null when the engine id is the root id. */
export function attemptIdRewrite(rootRequestId: string, engineRequestId: string): AttemptIdRewrite | null {
  if (!engineRequestId.startsWith(rootRequestId) || engineRequestId === rootRequestId) return null;
  return {
    needle: Buffer.from(`${engineRequestId}"`),
    suffixBytes: Buffer.byteLength(engineRequestId) - Buffer.byteLength(rootRequestId),
  };
}

/**
 * Cuts the attempt suffix from every JSON string value that ends in the engine request id, in place
 * (no copy: the bytes after each cut move left), and returns the shortened view; `buf` itself when
 * the id is absent (one scan). A string whose content is merely followed by an escaped quote does
 * not match: inside JSON strings a quote is always `\"`.
 */
export function withClientRequestId(buf: Buffer, rw: AttemptIdRewrite | null): Buffer {
  if (rw === null) return buf;
  let at = buf.indexOf(rw.needle);
  if (at < 0) return buf;
  let out = 0;
  let from = 0;
  while (at >= 0) {
    const cut = at + rw.needle.length - 1 - rw.suffixBytes; // where `#a<seq>` starts
    if (from !== out) buf.copyWithin(out, from, cut);
    out += cut - from;
    from = cut + rw.suffixBytes; // the closing quote stays
    at = buf.indexOf(rw.needle, from);
  }
  if (from !== out) buf.copyWithin(out, from, buf.length);
  out += buf.length - from;
  return buf.subarray(0, out);
}
