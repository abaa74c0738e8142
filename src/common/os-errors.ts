/**
 * Plain words for the operating-system errors a user can cause at start-up (a busy port, a missing
 * file), so every command says the same thing the same way. No other module spells these out.
 */

interface ErrnoLike {
  code?: unknown;
  syscall?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
}

const FILE_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'not found',
  ENOTDIR: 'not found (a parent is not a directory)',
  EISDIR: 'is a directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'name too long',
};

/** `"not found"` for a failed read of a file; the system message for anything unexpected. */
export function fileErrorText(err: unknown): string {
  const code = (err as ErrnoLike | null)?.code;
  return (typeof code === 'string' && FILE_ERRORS[code]) || (err as Error).message;
}

/**
 * One line for a server that could not listen (`"port 8000 on 127.0.0.1 is already in use"`), or
 * `undefined` when `err` is not a listen failure.
 */
export function listenErrorText(err: unknown): string | undefined {
  const e = err as ErrnoLike | null;
  if (e === null || typeof e !== 'object') return undefined;
  const where = `${typeof e.address === 'string' ? e.address : ''}:${typeof e.port === 'number' ? e.port : ''}`;
  if (e.syscall === 'listen' || e.syscall === 'bind') {
    if (e.code === 'EADDRINUSE') return `port ${String(e.port)} on ${String(e.address)} is already in use`;
    if (e.code === 'EACCES' || e.code === 'EPERM')
      return `no permission to listen on ${where} (ports below 1024 need privileges)`;
    if (e.code === 'EADDRNOTAVAIL')
      return `cannot listen on ${String(e.address)}: not an address of this host`;
    return `cannot listen on ${where}: ${String(e.code)}`;
  }
  // `server.listen(port, 'no-such-host')` fails in the name lookup before it binds
  if (e.syscall === 'getaddrinfo' && (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN'))
    return `cannot listen on ${String(e.hostname)}: host name not found`;
  return undefined;
}
