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

function bare(host: string): string {
  return host.toLowerCase().replace(/^\[|\]$/g, '');
}
