import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PEER_SECRET_HEADER } from '../../common/peer-secrets.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { coordinatorPeerSecrets } from './peer-secret-setup.js';

const proxy = { url: 'http://p:1', role: 'prefill' };
const direct = { url: 'http://d:1', role: 'decode', mode: 'direct', dispatchProfile: 'handoff' };

describe('coordinator peer secret at start', () => {
  it.each<{
    name: string;
    raw: Record<string, unknown>;
    env?: NodeJS.ProcessEnv;
    warns: boolean;
    sent?: string;
  }>([
    { name: 'none, proxy instances: one warning', raw: { instances: [proxy] }, warns: true },
    { name: 'none, no static instance (proxies may register): one warning', raw: {}, warns: true },
    { name: 'none, every instance direct: quiet', raw: { instances: [direct] }, warns: false },
    {
      name: 'configured: sent, no warning',
      raw: { instances: [proxy], engineProxy: { peerSecretEnv: 'S' } },
      env: { S: 'a-long-enough-secret' },
      warns: false,
      sent: 'a-long-enough-secret',
    },
  ])('$name', async ({ raw, env, warns, sent }) => {
    const lines: Array<{ level: number; msg: string }> = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const secrets = await coordinatorPeerSecrets(validateCoordinatorConfig(raw, env ?? {}), log);
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual(
      warns
        ? [expect.stringMatching(/^no engineProxy peer secret: calls to engine proxies are unauthenticated/)]
        : [],
    );
    expect(secrets?.header[PEER_SECRET_HEADER]).toBe(sent);
    secrets?.close();
  });
});
