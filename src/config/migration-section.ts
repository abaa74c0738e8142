import { z } from 'zod';

/** The coordinator's `migration` section (its own module: coordinator-config.ts is at its size limit). */
export const migrationSection = z
  .strictObject({
    maxPerRequest: z
      .int()
      .min(0)
      .max(10)
      .default(2)
      .describe(
        'in-flight migrations per request: after a committed stream loses its decode (or single) leg, a new ' +
          'attempt continues the answer from what the client already has (docs/migration.md); 0 = off',
      ),
    nonStreamLegs: z
      .enum(['stream', 'json'])
      .default('stream')
      .describe(
        'how the decode (or single) leg of a migratable non-stream request runs: "stream" asks the engine for a ' +
          'stream (with usage) and Motor assembles the JSON answer, so a leg that fails mid-answer is continued ' +
          'like a stream; "json" sends it as the client did (a failed leg is retried from the start)',
      ),
  })
  .prefault({})
  .describe('continuing a committed stream on another instance after its leg failed (issue 16)');
