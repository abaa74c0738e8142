/** Where an SGLang prefill engine takes bootstrap connections from its decode peers. */
export interface BootstrapAddress {
  host: string;
  port: number;
}

/** Explicit parts of a bootstrap address; null or absent means "from the URL". */
export interface BootstrapOverride {
  host?: string | null;
  port?: number | null;
}

const NO_OVERRIDE: BootstrapOverride = {};

/**
 * The bootstrap address of an engine reached at `baseUrl`: the URL's host (IPv6 brackets removed)
 * and port (the scheme's default, 443 or 80, when the URL names none), unless given explicitly.
 * The one formula for the coordinator (direct mode), the engine proxy and the simulator.
 */
export function bootstrapAddressFromUrl(
  baseUrl: string | URL,
  override: BootstrapOverride = NO_OVERRIDE,
): BootstrapAddress {
  const url = typeof baseUrl === 'string' ? new URL(baseUrl) : baseUrl;
  return {
    host: override.host ?? url.hostname.replace(/^\[|\]$/g, ''),
    port: override.port ?? (url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80),
  };
}
