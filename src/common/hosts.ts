/** `localhost`, 127.0.0.0/8 and ::1 (IPv6 brackets allowed). `0.0.0.0` / `::` are every interface. */
export function isLoopbackHost(host: string): boolean {
  const h = bare(host);
  return h === 'localhost' || h.endsWith('.localhost') || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** `0.0.0.0` / `::`: a listen address meaning every interface, which nobody can connect to. */
export function isWildcardHost(host: string): boolean {
  const h = bare(host);
  return h === '0.0.0.0' || h === '::';
}

/**
 * Cloud instance-metadata endpoints by name or by an address outside 169.254.0.0/16: GCP
 * (`metadata.google.internal`, `metadata`), Azure (`metadata.azure.com`), Alibaba (`100.100.100.200`),
 * AWS over IPv6 (`fd00:ec2::254`). AWS/GCP/Azure/OpenStack's `169.254.169.254` is link-local.
 */
const METADATA_HOSTS: ReadonlySet<string> = new Set([
  'metadata',
  'metadata.google.internal',
  'metadata.azure.com',
  '100.100.100.200',
  'fd00:ec2::254',
]);

/**
 * Link-local addresses (169.254.0.0/16, fe80::/10, also as IPv4-mapped IPv6) and cloud metadata
 * hosts: where an engine never lives and credentials often do. Takes a URL's `hostname` (the WHATWG
 * parser has already turned `2852039166` or `0xa9.0xfe.0xa9.0xfe` into `169.254.169.254`).
 */
export function isLinkLocalOrMetadataHost(host: string): boolean {
  const h = bare(host);
  if (METADATA_HOSTS.has(h)) return true;
  const v4 = ipv4Of(h);
  if (v4 !== null) return v4.startsWith('169.254.') || METADATA_HOSTS.has(v4);
  return /^fe[89ab][0-9a-f]?:/.test(h);
}

/** The dotted IPv4 of `h` (plain, or IPv4-mapped IPv6 as the URL parser writes it), else null. */
function ipv4Of(h: string): string | null {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(h)) return h;
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(h);
  if (!mapped) return /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h)?.[1] ?? null;
  const hi = parseInt(mapped[1]!, 16);
  const lo = parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

function bare(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
}
