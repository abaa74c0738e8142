/**
 * Defaults of the KV events hub and index, shared with the `kvEvents` config section (this module
 * imports nothing, so loading the config never loads ZeroMQ).
 */
export const KV_EVENTS_DEFAULTS = {
  /** Distinct blocks indexed; measured ≈ 270 bytes a block (200k blocks, 1.5 holders): ~35 MB. */
  maxIndexedBlocks: 131_072,
  replayTimeoutMs: 2_000,
  reconnectMs: 1_000,
  /** A routed request's blocks count as held on its instance this long before its events show them. */
  inflightTtlMs: 30_000,
} as const;
