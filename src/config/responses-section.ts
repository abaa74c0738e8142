import { z } from 'zod';

/** The coordinator's `responses` section: the OpenAI Responses API's store (state/response-store/). */
export const responsesSection = z
  .strictObject({
    store: z
      .enum(['memory', 'redis', 'none'])
      .default('memory')
      .describe(
        'where responses with `store: true` live: `memory` (this process, bounded, lost on restart), `redis` ' +
          '(shared by replicas and `--workers`, durable as Redis is: enable AOF), `none` (only `store: false` ' +
          'requests are served)',
      ),
    ttlSeconds: z
      .int()
      .min(1)
      .default(30 * 24 * 3600)
      .describe('how long a stored response can be retrieved and continued (seconds; OpenAI keeps 30 days)'),
    maxStoredBytes: z
      .int()
      .min(1024)
      .default(1024 * 1024)
      .describe(
        'largest stored response (its JSON, input items included); larger → the request fails with 400',
      ),
    maxChainDepth: z
      .int()
      .min(1)
      .default(100)
      .describe('most responses a `previous_response_id` chain may reach back; longer → 400'),
    memory: z
      .strictObject({
        maxEntries: z
          .int()
          .min(1)
          .default(10_000)
          .describe('responses kept at most (the oldest are evicted)'),
        maxBytes: z
          .int()
          .min(1024)
          .default(256 * 1024 * 1024)
          .describe('stored JSON bytes kept at most (the oldest are evicted)'),
      })
      .prefault({})
      .describe('bounds of the `memory` store'),
    redis: z
      .strictObject({
        url: z
          .string()
          .min(1)
          .default('redis://127.0.0.1:6379')
          .describe('Redis URL (`redis://[user:pass@]host:port[/db]`)'),
        keyPrefix: z.string().min(1).default('motor:response:').describe('key prefix, one per deployment'),
        commandTimeoutMs: z
          .int()
          .min(1)
          .default(2000)
          .describe('bound on one Redis command (ms); a timeout fails the request with 503'),
      })
      .prefault({})
      .describe('the `redis` store'),
  })
  .prefault({})
  .describe('the OpenAI Responses API: where stored responses (`store`, `previous_response_id`) live');
