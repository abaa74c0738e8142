import { z } from 'zod';
import { parsePeerSecrets, type PeerSecretSource } from '../common/peer-secrets.js';

/** The coordinator's `engineProxy` section (its own module: coordinator-config.ts is at its size limit). */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const engineProxySection = z
  .strictObject({
    peerSecretEnv: z
      .string()
      .regex(ENV_NAME, 'must be an environment variable name')
      .optional()
      .describe(
        'name of the environment variable holding the shared peer secret sent as `x-motor-peer-secret` on ' +
          'every envelope and `/v1/dispatch/stop` call to an engine proxy (comma-separated: the first is sent; ' +
          'unset variable = start-up error); the proxies take the same one (`MOTOR_PEER_SECRET` or ' +
          '`--peer-secret-file`). Fixed until restart: prefer `peerSecretFile` to rotate',
      ),
    peerSecretFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'file holding the shared peer secret(s), one per line, the first sent (at least 16 characters each); ' +
          're-read within a second when it changes, so a secret rotates without a restart. Neither this nor ' +
          '`peerSecretEnv`: calls to engine proxies carry no secret (a warning is logged at start)',
      ),
  })
  .prefault({})
  .describe(
    'how the coordinator authenticates to its engine proxies (docs/protocol.md "Peer authentication")',
  );

export type EngineProxySection = z.output<typeof engineProxySection>;

/** Where the peer secret comes from (null: none configured), or a one-line problem. */
export function peerSecretSource(
  section: EngineProxySection,
  env: NodeJS.ProcessEnv,
): { source: PeerSecretSource | null; problem?: string } {
  const { peerSecretEnv: name, peerSecretFile: file } = section;
  if (name !== undefined && file !== undefined)
    return { source: null, problem: 'engineProxy: set peerSecretEnv or peerSecretFile, not both' };
  if (file !== undefined) return { source: { file } };
  if (name === undefined) return { source: null };
  const value = env[name];
  if (value === undefined || value === '')
    return {
      source: null,
      problem: `engineProxy.peerSecretEnv: environment variable ${name} is unset or empty`,
    };
  try {
    return { source: { secrets: parsePeerSecrets(value, `engineProxy.peerSecretEnv: ${name}`) } };
  } catch (err) {
    return { source: null, problem: (err as Error).message };
  }
}
