import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import type { SimEngine } from '../src/simulator/engine-profiles.js';
import { http, sseEvents } from '../src/simulator/testing/index.js';
import {
  recorded,
  resetSim,
  settledLedgers,
  startCoordinatorProcess,
  startEngineProxy,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * Issue 14's acceptance: engines that behave as the real ones do (simulator profiles read from
 * upstream source, test/fixtures/engines/README.md) serve stream and non-stream requests with
 * Motor's defaults, in direct and in proxy mode, and in proxy mode the coordinator is given only
 * `{url, role}` per instance (engine, profile, capabilities and models are discovered).
 *
 * - vLLM NIXL of 2026-01 whose model ends every answer with EOS as early as allowed: the one-token
 *   prefill returns KV params only because Motor asks it for `min_tokens: 1` (F8, F11);
 * - vllm-ascend layer-wise (main ≥ v0.17 body): the decode's connector calls the metaserver with
 *   vLLM's external id and per-group block lists, ignoring the answer's status (F2, F4, F5);
 * - SGLang with its bootstrap server on its own port, which only `/server_info` tells (F16, F19).
 * Each pair serves its own model, so the request's model picks the pair.
 */

interface Pair {
  model: string;
  engine: SimEngine;
  /** `motor sim` arguments of both engines (prefill adds `prefillArgs`). */
  simArgs: string[];
  prefillArgs?: string[];
  /** The engine proxy's `--engine-config` (proxy mode). */
  engineConfig: Record<string, unknown>;
  /** What a direct-mode instance must be told (a stock vLLM says nothing about its connector). */
  direct: Record<string, unknown>;
}

const PAIRS = {
  'vllm nixl-2026-01, EOS-ended prefill': {
    model: 'nixl-eos',
    engine: 'vllm',
    simArgs: ['--engine-version', 'nixl-2026-01', '--eos-at', '1'],
    engineConfig: { kv_transfer_config: { kv_connector: 'NixlConnector' } },
    direct: { dispatchProfile: 'handoff' },
  },
  'vllm-ascend layer-wise (main)': {
    model: 'layerwise',
    engine: 'vllm-ascend',
    simArgs: ['--engine-version', 'main'],
    engineConfig: { kv_transfer_config: { kv_connector: 'MooncakeLayerwiseConnector' } },
    direct: { dispatchProfile: 'trigger' },
  },
  'sglang, separate bootstrap port': {
    model: 'sglang',
    engine: 'sglang',
    simArgs: [],
    prefillArgs: ['--bootstrap-port', '0'],
    engineConfig: { engine_type: 'sglang' },
    direct: { engine: 'sglang' },
  },
} satisfies Record<string, Pair>;
type PairName = keyof typeof PAIRS;

const sims = {} as Record<PairName, { P: MotorChild; D: MotorChild }>;
const coords = {} as Record<'direct' | 'proxy', CoordinatorHandle>;
const allSims = (): MotorChild[] => Object.values(sims).flatMap((s) => [s.P, s.D]);

beforeAll(async () => {
  await Promise.all(
    (Object.entries(PAIRS) as [PairName, Pair][]).map(async ([name, pair]) => {
      const args = [...pair.simArgs, '--model', pair.model];
      const [P, D] = await Promise.all([
        startSim({ role: 'prefill', engine: pair.engine, args: [...args, ...(pair.prefillArgs ?? [])] }),
        startSim({ role: 'decode', engine: pair.engine, args }),
      ]);
      sims[name] = { P, D };
    }),
  );
  const proxied = await Promise.all(
    (Object.entries(PAIRS) as [PairName, Pair][]).flatMap(([name, pair]) =>
      (['prefill', 'decode'] as const).map(async (role) => {
        const sim = role === 'prefill' ? sims[name].P : sims[name].D;
        const proxy = await startEngineProxy(sim, role, pair.engineConfig);
        return { url: proxy.url, role };
      }),
    ),
  );
  const direct = (Object.entries(PAIRS) as [PairName, Pair][]).flatMap(([name, pair]) => [
    { url: sims[name].P.url, role: 'prefill', mode: 'direct', ...pair.direct },
    { url: sims[name].D.url, role: 'decode', mode: 'direct', ...pair.direct },
  ]);
  [coords.proxy, coords.direct] = await Promise.all([
    startCoordinatorProcess({ instances: proxied }), // `{url, role}` only: everything else is discovered
    startCoordinatorProcess({ instances: direct }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all(Object.values(coords).map((c) => c?.stop()));
  await stopAllSpawned();
});

beforeEach(async () => {
  await Promise.all(allSims().map(resetSim));
});

afterEach(async () => {
  for (const ledger of await settledLedgers(allSims())) expect(ledger.in_flight).toEqual([]);
});

describe.each(['proxy', 'direct'] as const)('%s mode, Motor defaults', (mode) => {
  it('/v1/models lists every engine-reported model', async () => {
    const models = (await coords[mode].client.models.list()).data.map((m) => m.id).sort();
    expect(models).toEqual(
      Object.values(PAIRS)
        .map((p) => p.model)
        .sort(),
    );
  });

  describe.each(Object.keys(PAIRS) as PairName[])('%s', (name) => {
    const pair = PAIRS[name];
    const ask = (stream: boolean) =>
      http(coords[mode].url, 'POST', '/v1/chat/completions', {
        model: pair.model,
        messages: [{ role: 'user', content: 'Explain disaggregated prefill and decode in one line' }],
        max_tokens: 6,
        min_tokens: 3, // with `--eos-at 1` EOS comes as soon as allowed: the fourth token
        stream,
      });

    it.each([false, true])(
      'stream=%s: served, and the engines got what the real ones need',
      async (stream) => {
        const r = await ask(stream);
        expect(r.status, r.text).toBe(200);
        if (stream) {
          const events = sseEvents(r.text);
          expect(events.at(-1)).toBe('[DONE]');
          expect(r.text).not.toContain('"error"');
        } else {
          expect(
            (r.json as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
          ).not.toBe('');
        }
        const [p] = await recorded(sims[name].P);
        const [d] = await recorded(sims[name].D);
        expect(p && d).toBeTruthy();
        if (name === 'vllm nixl-2026-01, EOS-ended prefill') {
          // without min_tokens the prefill's one token would be EOS and its params null
          expect(p!.body).toMatchObject({ max_tokens: 1, min_tokens: 1 });
          expect(d!.body.kv_transfer_params).toMatchObject({ do_remote_prefill: true });
          if (!stream) {
            const answer = r.json as {
              choices: { finish_reason: string }[];
              usage: { completion_tokens: number };
            };
            expect(answer.choices[0]!.finish_reason).toBe('stop');
            expect(answer.usage.completion_tokens).toBe(4); // three tokens, then EOS (vLLM counts it)
          }
        } else if (name === 'vllm-ascend layer-wise (main)') {
          // the connector's body, per-group ids and vLLM's external id included, reached the prefill verbatim
          expect(p!.body.kv_transfer_params).toMatchObject({
            request_id: expect.stringMatching(/^chatcmpl-req-/),
            remote_block_ids: [expect.any(Array)],
            remote_block_size: [expect.any(Number)],
            remote_tp_size: expect.any(Number),
            do_remote_decode: true,
          });
        } else {
          const info = (await http(sims[name].P.url, 'GET', '/server_info')).json as {
            disaggregation_bootstrap_port: number;
          };
          const port = info.disaggregation_bootstrap_port;
          expect(port).not.toBe(Number(new URL(sims[name].P.url).port));
          expect(d!.body).toMatchObject({ bootstrap_port: port });
          expect(p!.body.bootstrap_room).toBe(d!.body.bootstrap_room);
        }
      },
    );
  });
});
