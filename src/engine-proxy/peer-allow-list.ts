/**
 * Which peer base URLs this proxy may call (stops to its peer, bootstrap discovery). Peer URLs come
 * from request envelopes, so they are only used when an operator listed them: no SSRF through a
 * client-chosen URL. Entries: `http://host:port` (exact origin) or `http://host:*` (any port).
 */
export class PeerAllowList {
  private readonly exact = new Set<string>();
  private readonly anyPort = new Set<string>();

  constructor(entries: readonly string[]) {
    for (const entry of entries) this.add(entry);
  }

  get size(): number {
    return this.exact.size + this.anyPort.size;
  }

  /** Adds an entry; throws on a malformed one (so a typo fails at start-up, not at the first stop). */
  add(entry: string): void {
    const wildcard = /^(https?):\/\/(\[[^\]]+\]|[^/:[\]]+):\*\/?$/i.exec(entry.trim());
    if (wildcard) {
      this.anyPort.add(`${wildcard[1]!.toLowerCase()}://${wildcard[2]!.toLowerCase()}`);
      return;
    }
    let url: URL;
    try {
      url = new URL(entry.trim());
    } catch {
      throw new Error(`--peer-allow: '${entry}' is not a URL (expected http://host:port or http://host:*)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new Error(`--peer-allow: '${entry}' must be an http(s) URL`);
    }
    if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.username) {
      throw new Error(`--peer-allow: '${entry}' must be a bare origin (no path, query or credentials)`);
    }
    this.exact.add(url.origin);
  }

  /** The peer's origin when `url` is allowed, else null. */
  check(url: string): string | null {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return null;
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return null;
    if (parsed.username || parsed.password) return null;
    if (this.exact.has(parsed.origin)) return parsed.origin;
    if (this.anyPort.has(`${parsed.protocol}//${parsed.hostname}`)) return parsed.origin;
    return null;
  }
}
