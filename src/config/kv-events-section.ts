import { z } from 'zod';
import { KV_EVENTS_DEFAULTS } from '../kv-events/kv-events-defaults.js';

/**
 * KV cache events config (issue 17): an instance's `kvEvents` (where its engine publishes) and the
 * coordinator's `kvEvents` section (the index). Own module: coordinator-config.ts is at its size limit.
 */

const zmqEndpoint = z
  .string()
  .regex(/^(tcp|ipc):\/\/\S+$/, 'expected a ZeroMQ endpoint: tcp://host:port or ipc://path');

export const instanceKvEventsSchema = z
  .strictObject({
    endpoint: zmqEndpoint.describe(
      "where to connect to the engine's KV event publisher (vLLM `--kv-events-config` `endpoint`; the " +
        'engine binds `tcp://*:5557` by default, so here `tcp://<engine host>:5557`; data-parallel rank r: port + r)',
    ),
    replayEndpoint: zmqEndpoint
      .optional()
      .describe(
        "the engine's `replay_endpoint` (same host): missed batches are asked of it; without it a gap drops " +
          "the instance's blocks until they are stored again",
      ),
    topic: z.string().default('').describe('the engine\'s `topic` (default `""`: every message)'),
  })
  .describe(
    "subscribe to this engine's KV cache events (BlockStored / BlockRemoved / AllBlocksCleared) to know " +
      'which prompt blocks it holds; vLLM `--kv-events-config` (SGLang: same format)',
  );

export const kvEventsSection = z
  .strictObject({
    maxIndexedBlocks: z
      .int()
      .min(1)
      .default(KV_EVENTS_DEFAULTS.maxIndexedBlocks)
      .describe(
        'bound on distinct blocks in the global KV block index (~270 bytes each, measured); past it the least recently ' +
          'stored block is forgotten for every instance',
      ),
    replayTimeoutMs: z
      .int()
      .min(1)
      .default(KV_EVENTS_DEFAULTS.replayTimeoutMs)
      .describe(
        "bound on one replay request to an engine's replay endpoint (ms); past it the instance resyncs",
      ),
    reconnectMs: z
      .int()
      .min(1)
      .default(KV_EVENTS_DEFAULTS.reconnectMs)
      .describe('wait before re-subscribing after an event stream failed (ms)'),
    inflightTtlMs: z
      .int()
      .min(0)
      .default(KV_EVENTS_DEFAULTS.inflightTtlMs)
      .describe(
        "`precise-prefix` routing: a request's prompt blocks count as held on the instance this coordinator " +
          "routed it to until that engine's events store them, the request fails, or this long passes (ms; " +
          'at most `maxIndexedBlocks` such blocks); 0 = route on the events alone. Each coordinator sees only its own routes',
      ),
  })
  .prefault({})
  .describe('the global KV block index fed by the instances that set `kvEvents`');

export type InstanceKvEvents = z.output<typeof instanceKvEventsSchema>;
export type KvEventsSection = z.output<typeof kvEventsSection>;
