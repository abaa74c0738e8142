import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from './logger.js';
import { placeholderSecretProblem } from './placeholder-secret.js';

/**
 * The header that carries the shared peer secret on every coordinator → engine-proxy call and every
 * proxy → proxy peer call. A proxy never forwards it to its engine (http-clients.ts).
 */
export const PEER_SECRET_HEADER = 'x-motor-peer-secret';

/** The environment variable `motor engine-proxy` reads its secret(s) from (comma-separated). */
export const PEER_SECRET_ENV = 'MOTOR_PEER_SECRET';

/** Shortest secret accepted: a guessable one would make the whole check decoration. */
export const PEER_SECRET_MIN_CHARS = 16;

/** How often a secret file's stat is polled for a change (rotation without restart). */
export const PEER_SECRET_POLL_MS = 1_000;

/** Bytes of a per-attempt token (base64url: 22 characters), like the coordinator's metaserver tokens. */
const TOKEN_BYTES = 16;

/**
 * Secrets from a file's text or an environment variable: one per line or comma-separated, blank
 * entries ignored. The first is the one sent; all are accepted (rotation: current + previous).
 * Throws a one-line error naming `from` (never the secret).
 */
export function parsePeerSecrets(text: string, from: string): string[] {
  const secrets = [...new Set(text.split(/[\r\n,]+/).flatMap((s) => s.trim() || []))];
  if (secrets.length === 0) throw new Error(`${from}: no peer secret in it`);
  const short = secrets.findIndex((s) => s.length < PEER_SECRET_MIN_CHARS);
  if (short >= 0) {
    throw new Error(`${from}: peer secret #${short + 1} is shorter than ${PEER_SECRET_MIN_CHARS} characters`);
  }
  const placeholder = secrets.findIndex((s) => placeholderSecretProblem('', s) !== undefined);
  if (placeholder >= 0)
    throw new Error(
      placeholderSecretProblem(`${from}: peer secret #${placeholder + 1}`, secrets[placeholder]),
    );
  return secrets;
}

/** Where the secrets come from: a literal list (environment; fixed) or a file (re-read when it changes). */
export type PeerSecretSource = { secrets: readonly string[] } | { file: string; pollMs?: number };

/**
 * The shared secret between a coordinator and its engine proxies, and between proxies. The first
 * secret is sent (`header`); every one is accepted (`accepts`), compared in constant time. A file
 * source is polled (`fs.watchFile`, every `pollMs`) and re-read when its stat changes: a rotation is
 * writing `new,old` everywhere, then `new` once every peer sends it. A re-read that fails (missing,
 * empty, too short) keeps the secrets in use and emits `reload_failed`; a good one emits `reload`.
 */
export class PeerSecrets extends EventEmitter<{ reload: []; reload_failed: [Error] }> {
  private secrets: readonly string[] = [];
  private digests: readonly Buffer[] = [];
  private sent: Readonly<Record<string, string>> = {};
  private readonly watched: string | null;

  private constructor(secrets: readonly string[], file: string | null) {
    super();
    this.watched = file;
    this.use(secrets);
  }

  /** Loads the secrets (a file is read now and then watched); throws a one-line error. */
  static async load(source: PeerSecretSource): Promise<PeerSecrets> {
    if ('secrets' in source)
      return new PeerSecrets(parsePeerSecrets(source.secrets.join('\n'), 'peer secret'), null);
    const keyring = new PeerSecrets(await readSecrets(source.file), source.file);
    watchFile(
      source.file,
      { interval: source.pollMs ?? PEER_SECRET_POLL_MS, persistent: false },
      keyring.onStat,
    );
    return keyring;
  }

  /** The headers to add to a peer call (one frozen object, rebuilt only on a reload). */
  get header(): Readonly<Record<string, string>> {
    return this.sent;
  }

  /** Whether a presented header value is one of the secrets; constant time in the secret's content. */
  accepts(presented: string | readonly string[] | undefined): boolean {
    if (typeof presented !== 'string' || presented.length === 0) return false;
    const digest = sha256(presented);
    let ok = false;
    for (const d of this.digests) ok = timingSafeEqual(d, digest) || ok; // no early exit
    return ok;
  }

  /** An unguessable token bound to `id` (an attempt's engine request id), under the sent secret. */
  tokenFor(id: string): string {
    return token(this.secrets[0]!, id);
  }

  /** Whether `presented` is `tokenFor(id)` under any accepted secret (constant time). */
  acceptsToken(id: string, presented: string): boolean {
    const got = Buffer.from(presented);
    let ok = false;
    for (const secret of this.secrets) {
      const want = Buffer.from(token(secret, id));
      ok = (want.length === got.length && timingSafeEqual(want, got)) || ok;
    }
    return ok;
  }

  /** Stops watching the file. */
  close(): void {
    if (this.watched !== null) unwatchFile(this.watched, this.onStat);
  }

  private readonly onStat = (now: Stats, before: Stats): void => {
    if (now.mtimeMs === before.mtimeMs && now.size === before.size && now.ino === before.ino) return;
    readSecrets(this.watched!).then(
      (secrets) => {
        this.use(secrets);
        this.emit('reload');
      },
      (err: Error) => this.emit('reload_failed', err),
    );
  };

  private use(secrets: readonly string[]): void {
    this.secrets = secrets;
    this.digests = secrets.map(sha256);
    this.sent = Object.freeze({ [PEER_SECRET_HEADER]: secrets[0]! });
  }
}

/**
 * The secrets of `source`, their reloads logged; null without a source, after logging `warning`
 * (null: stay quiet). Throws a one-line error when the source is unusable at start.
 */
export async function loadPeerSecrets(
  source: PeerSecretSource | null | undefined,
  log: Logger,
  warning: string | null,
): Promise<PeerSecrets | null> {
  if (!source) {
    if (warning !== null) log.warn(warning);
    return null;
  }
  const secrets = await PeerSecrets.load(source);
  secrets.on('reload', () => log.info('peer secret file re-read'));
  secrets.on('reload_failed', (err) =>
    log.warn({ err: err.message }, 'peer secret file unusable; keeping the secrets in use'),
  );
  return secrets;
}

async function readSecrets(file: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`peer secret file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
  return parsePeerSecrets(text, `peer secret file ${file}`);
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function token(secret: string, id: string): string {
  const mac = createHmac('sha256', secret).update('motor-metaserver\0').update(id).digest();
  return mac.subarray(0, TOKEN_BYTES).toString('base64url');
}
