import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCluster, type ClusterProfile, type LocalCluster } from '../src/cluster/local-cluster.js';
import { recorded } from '../src/engine-proxy/testing/index.js';

/**
 * Issue 15 finding 3 end to end, through `motor up`'s processes (the built CLI): the cluster's own
 * peer secret lets the coordinator and the proxies work together (trigger: the decode engine calls the
 * prefill proxy's per-attempt metaserver URL; bootstrap: the decode proxy reads its peer's info), while
 * a caller without it is refused. `motor up`'s own test covers the handoff profile.
 */
describe.each<ClusterProfile>(['trigger', 'bootstrap'])(
  'motor up (%s) with a per-cluster peer secret',
  (profile) => {
    let cluster: LocalCluster;
    beforeAll(async () => {
      cluster = await startLocalCluster({
        prefill: 1,
        decode: 1,
        union: 0,
        profile,
        host: '127.0.0.1',
        port: 0,
        model: 'motor-sim-7b',
        timeScale: 0,
        direct: false,
        simArgs: [],
      });
    }, 120_000);
    afterAll(() => cluster?.stop());

    const stop = {
      root_request_id: 'r',
      engine_request_id: 'r#a1',
      pair_id: 'p',
      attempt_seq: 1,
      reason: 'client_disconnect',
    };

    it('serves chat through the proxies', async () => {
      for (const stream of [false, true]) {
        const res = await fetch(`${cluster.baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'motor-sim-7b',
            messages: [{ role: 'user', content: 'Hello!' }],
            max_tokens: 4,
            stream,
          }),
        });
        expect(res.status).toBe(200);
        expect(await res.text()).toContain(stream ? 'data: [DONE]' : '"completion_tokens":4');
      }
      if (profile !== 'trigger') return;
      const decode = cluster.instances.find((i) => i.role === 'decode')!;
      const prefill = cluster.instances.find((i) => i.role === 'prefill')!;
      const legs = (await recorded(decode.simUrl)).filter((r) => r.path === '/v1/chat/completions');
      expect(legs).toHaveLength(2);
      for (const leg of legs) {
        expect(leg.body.kv_transfer_params.metaserver).toMatch(
          new RegExp(`^${prefill.url}/v1/metaserver/[^/]+/[A-Za-z0-9_-]{22}$`),
        );
      }
    });

    it('a proxy refuses a stop, a dispatch and the untokened metaserver from a caller without it', async () => {
      for (const inst of cluster.instances) {
        const post = (path: string, body: unknown) =>
          fetch(`${inst.url}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
        expect((await post('/v1/dispatch/stop', stop)).status).toBe(401);
        expect((await post('/v1/chat/completions', { model: 'motor-sim-7b', messages: [] })).status).toBe(
          401,
        );
        expect((await post('/v1/metaserver', { request_id: 'r#a1' })).status).toBe(404);
        expect((await fetch(`${inst.url}/health`)).status).toBe(200);
      }
    });
  },
);
