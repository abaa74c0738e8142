import { z } from 'zod';

/** The coordinator's `timeouts` section (its own module: coordinator-config.ts is at its size limit). */

const ms = (def: number, what: string) => z.int().min(0).default(def).describe(`${what} (ms)`);

export const timeoutsSection = z
  .strictObject({
    connectMs: ms(5_000, 'TCP connect timeout to an instance'),
    firstTokenMs: ms(
      120_000,
      'attempt start → first byte for the client (prefill included; non-stream: the prefill leg); retryable; 0 = off',
    ),
    idleMs: ms(
      60_000,
      'longest engine silence between stream chunks after the first (not counted while the client is not reading); 0 = off',
    ),
    clientStallMs: ms(
      60_000,
      'longest time a stream client may leave its socket full (not reading) before it is cut with `client_stalled`, charged to no instance; 0 = off',
    ),
    totalMs: ms(600_000, 'overall deadline of a client request, retries included; 0 = off'),
    stopMs: ms(2_000, 'timeout of one `/v1/dispatch/stop` (or SGLang `/abort_request`) call'),
    metaserverWaitMs: ms(
      5_000,
      'unused since direct-trigger metaserver URLs carry a per-attempt token (an unknown one is 404 at once); kept so configs load',
    ),
  })
  .prefault({})
  .describe('0 turns a timeout off where noted');
