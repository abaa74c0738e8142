import { isLoopbackHost } from '../common/hosts.js';
import { isSglangPrefill, type EngineProxyOptions } from './options.js';

/** The host of a `--peer-allow` entry (`http://host:port` or `http://host:*`), or null when malformed. */
function peerHost(entry: string): string | null {
  try {
    return new URL(entry.trim().replace(/:\*\/?$/, '')).hostname;
  } catch {
    return null;
  }
}

/**
 * Why an SGLang prefill proxy must not start with this bootstrap host, or null. The bootstrap host
 * (default: the engine URL's host) is what decode engines connect to; a loopback one only works when
 * every peer is on this machine, so a proxy that listens beyond loopback or allows a remote peer
 * needs `--bootstrap-host`.
 */
export function bootstrapHostProblem(
  opts: Pick<EngineProxyOptions, 'engine' | 'role' | 'engineUrl' | 'bootstrapHost' | 'host' | 'peerAllow'>,
): string | null {
  if (!isSglangPrefill(opts)) return null;
  const host = opts.bootstrapHost ?? new URL(opts.engineUrl).hostname;
  if (!isLoopbackHost(host)) return null;
  const remotePeer = opts.peerAllow.find((entry) => {
    const h = peerHost(entry);
    return h !== null && !isLoopbackHost(h);
  });
  const remote = !isLoopbackHost(opts.host)
    ? `the proxy listens on ${opts.host}`
    : remotePeer !== undefined
      ? `--peer-allow names ${remotePeer}`
      : null;
  if (remote === null) return null;
  return (
    `bootstrap host ${host} is loopback but ${remote}: decode engines on other hosts could not reach ` +
    "this prefill's bootstrap server; set --bootstrap-host to an address they can reach"
  );
}
