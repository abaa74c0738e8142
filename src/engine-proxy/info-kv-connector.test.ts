import { afterEach, describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { resolveOptions } from '../cli/engine-proxy.js';
import { engineReply } from './testing/fake-clients.js';
import { startInProcessProxy, type InProcessProxy } from './testing/in-process-proxy.js';
import { ENGINE_PROXY_DEFAULTS } from './options.js';
import { engineConfigFile } from './testing/index.js';

const NIXL = fixtureBody('vllm/nixl-newest/kv-transfer-config.prefill.json');
const MOONCAKE = fixtureBody('vllm-ascend/mooncake-main/kv-transfer-config.decode.json');

type Cli = Parameters<typeof resolveOptions>[0];
const cli = (name: string, config: unknown): Cli => ({
  ...ENGINE_PROXY_DEFAULTS,
  engineUrl: 'http://127.0.0.1:30000',
  role: 'decode',
  engineConfig: engineConfigFile(name, config),
  peerAllow: [],
  model: [],
  heartbeatMs: 2000,
  drainTimeoutMs: 1000,
});

let proxy: InProcessProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

// The coordinator pairs a prefill and a decode only within one connector; the proxy is where the
// engine config is read, so its info says which connector that is.
describe('/v1/motor/info kv_connector: the connector classified from --engine-config', () => {
  it.each([
    { name: 'NIXL', config: { kv_transfer_config: NIXL }, kvConnector: 'NixlConnector' },
    { name: 'Mooncake V1', config: { kv_transfer_config: MOONCAKE }, kvConnector: 'MooncakeConnectorV1' },
    {
      name: 'MultiConnector: its transport (first) connector',
      config: {
        kv_transfer_config: {
          kv_connector: 'MultiConnector',
          kv_connector_extra_config: { connectors: [MOONCAKE, { kv_connector: 'UCMConnector' }] },
        },
      },
      kvConnector: 'MooncakeConnectorV1',
    },
    {
      name: 'explicit profile: the connector still reported',
      config: { dispatch_profile: 'handoff', kv_transfer_config: NIXL },
      kvConnector: 'NixlConnector',
    },
    { name: 'SGLang: none', config: { engine_type: 'sglang' }, kvConnector: null },
  ])('$name → $kvConnector', async ({ name, config, kvConnector }) => {
    const opts = await resolveOptions(cli(`kv-connector-${name.replace(/\W+/g, '-')}`, config));
    if (typeof opts === 'string') throw new Error(opts);
    expect(opts.kvConnector).toBe(kvConnector);
    proxy = await startInProcessProxy(opts, () => engineReply(200, ''));
    const info = (await proxy.call('GET', '/v1/motor/info')).json as Record<string, unknown>;
    expect(info.kv_connector).toBe(kvConnector);
  });
});
