import { afterEach, describe, expect, it } from 'vitest';
import { engineConfigFile } from '../engine-proxy/testing/index.js';
import { ENGINE_PROXY_DEFAULTS } from '../engine-proxy/options.js';
import { resolveOptions } from './engine-proxy.js';

type Cli = Parameters<typeof resolveOptions>[0];
const sglang = engineConfigFile('sglang-flags', { engine_type: 'sglang' });
const cli = (over: Partial<Cli>): Cli => ({
  ...ENGINE_PROXY_DEFAULTS,
  engineUrl: 'http://127.0.0.1:30000',
  role: 'prefill',
  engineConfig: sglang,
  peerAllow: [],
  model: [],
  heartbeatMs: 2000,
  drainTimeoutMs: 1000,
  ...over,
});

describe('motor engine-proxy flags (credentials, bootstrap host)', () => {
  afterEach(() => {
    delete process.env.MOTOR_ENGINE_API_KEY;
    delete process.env.MOTOR_ENGINE_ADMIN_API_KEY;
    delete process.env.MOTOR_PEER_SECRET;
  });

  const S = 's'.repeat(16);
  it.each<{ name: string; file?: string; env?: string; want: unknown }>([
    { name: 'neither: none', want: { peerSecret: null } },
    {
      name: 'MOTOR_PEER_SECRET, comma-separated',
      env: `${S},o${S}`,
      want: { peerSecret: { secrets: [S, `o${S}`] } },
    },
    { name: '--peer-secret-file wins', file: '/run/s', env: S, want: { peerSecret: { file: '/run/s' } } },
    { name: 'empty MOTOR_PEER_SECRET: none', env: '', want: { peerSecret: null } },
    {
      name: 'a short one: one line',
      env: 'short',
      want: 'MOTOR_PEER_SECRET: peer secret #1 is shorter than 16 characters',
    },
  ])('peer secret: $name', async ({ file, env, want }) => {
    if (env !== undefined) process.env.MOTOR_PEER_SECRET = env;
    const got = await resolveOptions(cli(file !== undefined ? { peerSecretFile: file } : {}));
    if (typeof want === 'string') expect(got).toBe(want);
    else expect(got).toMatchObject(want as object);
  });

  it('passes --engine-api-key / --engine-admin-api-key through; an empty key is none', async () => {
    const opts = await resolveOptions(cli({ engineApiKey: 'k', engineAdminApiKey: '' }));
    expect(opts).toMatchObject({ engineApiKey: 'k', engineAdminApiKey: null });
  });

  it('reads MOTOR_ENGINE_API_KEY / MOTOR_ENGINE_ADMIN_API_KEY; a flag wins', async () => {
    process.env.MOTOR_ENGINE_API_KEY = 'from-env';
    process.env.MOTOR_ENGINE_ADMIN_API_KEY = 'admin-env';
    expect(await resolveOptions(cli({}))).toMatchObject({
      engineApiKey: 'from-env',
      engineAdminApiKey: 'admin-env',
    });
    expect(await resolveOptions(cli({ engineApiKey: 'flag' }))).toMatchObject({ engineApiKey: 'flag' });
  });

  it('refuses a loopback bootstrap host when the proxy listens beyond loopback, naming --bootstrap-host', async () => {
    const problem = await resolveOptions(cli({ host: '0.0.0.0' }));
    expect(problem).toEqual(
      expect.stringMatching(/^bootstrap host 127\.0\.0\.1 is loopback .*--bootstrap-host/),
    );
    expect(await resolveOptions(cli({ host: '0.0.0.0', bootstrapHost: '10.0.0.5' }))).toMatchObject({
      bootstrapHost: '10.0.0.5',
    });
  });

  it('passes the listener limits through and refuses a header timeout above the request timeout, naming the flags', async () => {
    expect(
      await resolveOptions(cli({ headersTimeoutMs: 5, requestTimeoutMs: 9, maxConnections: 7 })),
    ).toMatchObject({
      headersTimeoutMs: 5,
      requestTimeoutMs: 9,
      maxConnections: 7,
    });
    expect(await resolveOptions(cli({ headersTimeoutMs: 10, requestTimeoutMs: 9 }))).toBe(
      '--headers-timeout-ms (10) must not exceed --request-timeout-ms (9)',
    );
  });
});

describe('motor engine-proxy --engine-config reads what motor classify reads', () => {
  it.each<[string, string, unknown]>([
    [
      "vLLM's bare --kv-transfer-config JSON, inline",
      '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
      { engine: 'vllm', dispatchProfile: 'handoff', kvConnector: 'NixlConnector' },
    ],
    [
      'SGLang launch arguments',
      '--disaggregation-mode prefill --disaggregation-transfer-backend mooncake',
      { engine: 'sglang', dispatchProfile: 'bootstrap' },
    ],
  ])('%s', async (_name, engineConfig, want) => {
    expect(await resolveOptions(cli({ engineConfig }))).toMatchObject(want as object);
  });

  it('a typo refuses to start, naming the nearest connector', async () => {
    const problem = await resolveOptions(cli({ engineConfig: '{"kv_connector":"NixlConnecter"}' }));
    expect(problem).toMatch(/^refusing to start a prefill proxy .*did you mean 'NixlConnector'\?/);
  });
});
