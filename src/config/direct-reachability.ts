import { isLoopbackHost, isWildcardHost } from '../common/hosts.js';
import type { ResolvedInstance } from './coordinator-config.js';

type Described = Pick<ResolvedInstance, 'id' | 'url' | 'role' | 'mode' | 'engine' | 'profile'>;

const hostOf = (url: string): string => new URL(url).hostname;

/**
 * In direct mode the coordinator hands stock engines addresses they must reach themselves: a
 * layer-wise decode calls `<server.publicUrl, else the bound URL>/v1/metaserver/<token>`, an SGLang decode
 * connects to the prefill URL's host for bootstrap. One line per configured combination that cannot
 * work (instances registered later are not seen here).
 */
export function directReachabilityIssues(
  server: { host: string; publicUrl?: string | undefined },
  instances: readonly Described[],
): string[] {
  const issues: string[] = [];
  const direct = instances.filter((i) => i.mode === 'direct');
  const triggerDecodes = direct.filter((i) => i.role === 'decode' && i.profile === 'trigger');
  const metaserverHost = server.publicUrl ? hostOf(server.publicUrl) : server.host;
  if (triggerDecodes.length > 0 && isWildcardHost(metaserverHost)) {
    issues.push(
      `server.publicUrl: required with direct trigger decodes when server.host is ${server.host} ` +
        '(decode engines are told to call <publicUrl>/v1/metaserver/<token> and cannot call a wildcard address)',
    );
  } else if (isLoopbackHost(metaserverHost)) {
    const remote = triggerDecodes.find((d) => !isLoopbackHost(hostOf(d.url)));
    if (remote) {
      issues.push(
        `server.publicUrl: decode ${remote.id} at ${hostOf(remote.url)} cannot call the metaserver on ` +
          `loopback ${metaserverHost}; set server.publicUrl to an address it can reach`,
      );
    }
  }
  const sglang = direct.filter((i) => i.engine === 'sglang');
  const remoteDecode = sglang.find((i) => i.role === 'decode' && !isLoopbackHost(hostOf(i.url)));
  for (const prefill of sglang.filter((i) => i.role === 'prefill')) {
    if (remoteDecode && isLoopbackHost(hostOf(prefill.url))) {
      issues.push(
        `instances (${prefill.id}).url: SGLang prefill at loopback ${hostOf(prefill.url)}, but decode ` +
          `${remoteDecode.id} at ${hostOf(remoteDecode.url)} connects to that host for bootstrap; use an ` +
          'address the decode engine can reach',
      );
    }
  }
  return issues;
}
