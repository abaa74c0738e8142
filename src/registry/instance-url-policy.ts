import { networkInterfaces } from 'node:os';
import { isLinkLocalOrMetadataHost, isLoopbackHost, isWildcardHost } from '../common/hosts.js';

/**
 * Which URLs the management API accepts for an instance (issue 15 finding 10): never a link-local
 * or cloud-metadata address (where credentials live and no engine does), never this coordinator's
 * own listener (a request sent there recurses until sockets run out) — unless the operator allows
 * it (`management.allowInstanceUrls`). A host name that only resolves to this coordinator is not
 * caught here (no DNS lookup); the hop header refuses the looped request instead (hop-header.ts).
 */
export interface InstanceUrlPolicy {
  readonly allowLinkLocal: boolean;
  readonly allowSelf: boolean;
  /** The ports this coordinator listens on (gateway, management), read at each check. */
  ownPorts(): readonly number[];
}

/** Why `url` (already a valid http(s) URL) is refused as an instance URL, or null when it is not. */
export function instanceUrlRefusal(url: string, policy: InstanceUrlPolicy): string | null {
  const u = new URL(url);
  if (!policy.allowLinkLocal && isLinkLocalOrMetadataHost(u.hostname)) {
    return (
      `points at a link-local or cloud-metadata address (${u.hostname}), never an engine; ` +
      'set management.allowInstanceUrls.linkLocal to allow it'
    );
  }
  if (!policy.allowSelf) {
    const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
    if (policy.ownPorts().includes(port) && isThisHost(u.hostname)) {
      return (
        `points at this coordinator's own listener (${u.host}): its requests would come back to it; ` +
        'set management.allowInstanceUrls.self to allow it'
      );
    }
  }
  return null;
}

/** Loopback, a wildcard, or an address of one of this machine's interfaces. */
function isThisHost(hostname: string): boolean {
  if (isLoopbackHost(hostname) || isWildcardHost(hostname)) return true;
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.address.toLowerCase() === h) return true;
  return false;
}
