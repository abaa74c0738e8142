/**
 * `localhost`, 127.0.0.0/8 and ::1 (IPv6 brackets allowed), 127.0.0.0/8 also written as IPv6 that
 * reaches it on this host (IPv4-mapped, -translated, -compatible). `0.0.0.0` / `::` are every interface.
 */
export function isLoopbackHost(host: string): boolean {
  const h = bare(host);
  if (h === 'localhost' || h.endsWith('.localhost') || h === '::1') return true;
  return ipv4Of(h, false)?.startsWith('127.') ?? false;
}

/** `0.0.0.0` / `::`: a listen address meaning every interface, which nobody can connect to. */
export function isWildcardHost(host: string): boolean {
  const h = bare(host);
  return h === '0.0.0.0' || h === '::';
}

/**
 * Cloud instance-metadata endpoints by name or by an address outside 169.254.0.0/16: GCP
 * (`metadata.google.internal`, `metadata`), Azure (`metadata.azure.com`, and its WireServer
 * `168.63.129.16`, which serves VM agent and extension configuration: Microsoft Learn, "What is IP
 * address 168.63.129.16?"), Alibaba (`100.100.100.200`), AWS over IPv6 (`fd00:ec2::254`).
 * AWS/GCP/Azure/OpenStack's `169.254.169.254` is link-local.
 */
const METADATA_HOSTS: ReadonlySet<string> = new Set([
  'metadata',
  'metadata.google.internal',
  'metadata.azure.com',
  '168.63.129.16',
  '100.100.100.200',
  'fd00:ec2::254',
]);

/**
 * Link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata hosts, an IPv4 one also
 * written as IPv6 that reaches it (IPv4-mapped, -translated, -compatible, NAT64): where an engine
 * never lives and credentials often do. Takes a URL's `hostname` (the WHATWG parser has already
 * turned `2852039166` or `0xa9.0xfe.0xa9.0xfe` into `169.254.169.254`).
 */
export function isLinkLocalOrMetadataHost(host: string): boolean {
  const h = bare(host);
  if (METADATA_HOSTS.has(h)) return true;
  const v4 = ipv4Of(h, true);
  if (v4 !== null) return v4.startsWith('169.254.') || METADATA_HOSTS.has(v4);
  return /^fe[89ab][0-9a-f]?:/.test(h);
}

/**
 * The dotted IPv4 of `h`: plain, or carried in the last 32 bits of an IPv6 address that reaches it —
 * IPv4-mapped `::ffff:0:0/96` and IPv4-translated `::ffff:0:0:0/96` (RFC 4291 §2.5.5.2, RFC 2765
 * §2.1), IPv4-compatible `::/96` (RFC 4291 §2.5.5.1; `::` and `::1` aside), and with `nat64` the
 * well-known NAT64 prefix `64:ff9b::/96` (RFC 6052 §2.1), which a NAT64 gateway forwards to that IPv4
 * address. Else null.
 */
function ipv4Of(h: string, nat64: boolean): string | null {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(h)) return h;
  const words = ipv6Words(h);
  if (words === null) return null;
  const zero = (from: number, to: number): boolean => words.slice(from, to).every((w) => w === 0);
  const embedded =
    (zero(0, 5) && words[5] === 0xffff) ||
    (zero(0, 4) && words[4] === 0xffff && words[5] === 0) ||
    (zero(0, 6) && (words[6] !== 0 || words[7]! > 1)) ||
    (nat64 && words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6));
  if (!embedded) return null;
  const hi = words[6]!;
  const lo = words[7]!;
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** The eight 16-bit words of an IPv6 address (a trailing dotted IPv4 allowed), else null. */
function ipv6Words(h: string): number[] | null {
  if (!h.includes(':')) return null;
  let text = h;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const part = (s: string): number[] | null => {
    if (s === '') return [];
    const out: number[] = [];
    for (const w of s.split(':')) {
      if (!/^[0-9a-f]{1,4}$/.test(w)) return null;
      out.push(parseInt(w, 16));
    }
    return out;
  };
  const head = part(halves[0]!);
  const tail = halves.length === 2 ? part(halves[1]!) : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const fill = 8 - head.length - tail.length;
  return fill < 1 ? null : [...head, ...new Array<number>(fill).fill(0), ...tail];
}

function bare(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
}
