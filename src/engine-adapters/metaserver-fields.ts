import { z } from 'zod';
import type { MetaserverKvFields } from './types.js';

/**
 * The body a decode engine's Mooncake layer-wise connector POSTs to the metaserver: its KV fields
 * (docs/engines.md, trigger). Unknown keys are kept aside so they still reach the prefill engine.
 */
export const metaserverKvFieldsSchema = z.object({
  request_id: z.string().min(1),
  do_remote_decode: z.boolean(),
  remote_block_ids: z.array(z.int().min(0)),
  remote_block_size: z.int().min(1),
  remote_engine_id: z.string().min(1),
  remote_host: z.string().min(1),
  remote_port: z.int().min(1).max(65535),
  remote_cached_tokens: z.int().min(0),
});

export type MetaserverParse =
  | { ok: true; value: MetaserverKvFields; extra: Record<string, unknown> }
  | { ok: false; message: string; param: string };

/** Validates a metaserver body; the error names the first missing or malformed field. */
export function parseMetaserverKvFields(input: unknown): MetaserverParse {
  const result = metaserverKvFieldsSchema.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const param = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
    return { ok: false, message: `${param}: ${issue.message}`, param };
  }
  const extra: Record<string, unknown> = {};
  const known = new Set(Object.keys(metaserverKvFieldsSchema.shape));
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    if (!known.has(key)) extra[key] = value;
  }
  return { ok: true, value: result.data, extra };
}
