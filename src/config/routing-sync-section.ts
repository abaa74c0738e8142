import { z } from 'zod';

/**
 * The coordinator's `routingSync` section: routing state shared between coordinator replicas over
 * Redis pub/sub (state/routing-sync/). Absent = each replica routes on its own decisions only, and
 * nothing of the sync is loaded.
 */

const ms = (def: number, what: string) => z.int().min(1).default(def).describe(`${what} (ms)`);

export const routingSyncSection = z
  .strictObject({
    redis: z
      .strictObject({
        url: z
          .string()
          .min(1)
          .optional()
          .describe('Redis URL (`redis://[user:pass@]host:port[/db]`); default `responses.redis.url`'),
      })
      .prefault({})
      .describe('the Redis server the replicas publish on (the response store may share it)'),
    channel: z
      .string()
      .min(1)
      .max(100)
      .default('motor:routing')
      .describe('pub/sub channel, one per fleet: every replica of one deployment names the same'),
    flushMs: ms(1, 'longest wait before a routing decision is published (decisions are sent in batches)'),
    maxOpsPerBatch: z
      .int()
      .min(1)
      .max(10_000)
      .default(256)
      .describe('a batch is published as soon as it holds this many decisions'),
    heartbeatMs: ms(1_000, 'a quiet replica says it is alive this often'),
    peerTimeoutMs: ms(
      5_000,
      'a replica not heard from this long is gone: its loads and expected KV blocks are dropped',
    ),
    warmStartTimeoutMs: ms(
      3_000,
      'start-up waits at most this long for the other replicas to send their routing state before ready',
    ),
  })
  .optional()
  .describe(
    'share routing decisions (prefix index, decode and prefill load, expected KV blocks) with the other ' +
      'coordinator replicas over Redis pub/sub; absent = off',
  );

export type RoutingSyncSettings = NonNullable<z.output<typeof routingSyncSection>>;
