import type { Logger } from '../../common/logger.js';
import { loadPeerSecrets, type PeerSecrets } from '../../common/peer-secrets.js';
import type { CoordinatorConfig } from '../../config/coordinator-config.js';

const NO_PEER_SECRET =
  'no engineProxy peer secret: calls to engine proxies are unauthenticated, so anyone who reaches a ' +
  'proxy can dispatch to its engine and stop attempts (docs/protocol.md "Peer authentication")';

/**
 * The engine-proxy peer secret of `engineProxy` (null: none). Without one, one warning at start
 * unless every static instance is direct (proxies may also register later, so an empty fleet warns).
 */
export function coordinatorPeerSecrets(
  config: Pick<CoordinatorConfig, 'peerSecret' | 'instances'>,
  log: Logger,
): Promise<PeerSecrets | null> {
  const allDirect = config.instances.length > 0 && config.instances.every((i) => i.mode === 'direct');
  return loadPeerSecrets(config.peerSecret, log, allDirect ? null : NO_PEER_SECRET);
}
