import { z } from 'zod';
import { DEFAULT_SERVER_LIMITS as D, serverLimitsProblem } from '../common/server-limits.js';
import { corsSectionSchema } from './cors-section.js';

/** The coordinator's `server` section: the OpenAI-compatible listener, its keys and its connection limits. */

/** `off`, `api-key` or `header:<HTTP header name>` (see coordinator/gateway/tenant-salt.ts). */
const TENANT_ISOLATION = /^(off|api-key|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$/;

/** OpenAI's own bounds (2,048 messages, 128 tools) with room: parsing this many keys takes milliseconds. */
export const DEFAULT_MAX_JSON_KEYS = 32_768;
/** 32 bodies of the default 4 MiB limit, or about a thousand ordinary ones. */
export const DEFAULT_MAX_INFLIGHT_BODY_BYTES = 128 * 1024 * 1024;
/** Covers an ordinary chat body whole, so only large bodies are counted as they arrive. */
export const DEFAULT_BODY_RESERVATION_BYTES = 64 * 1024;

const limitMs = (def: number, what: string) => z.int().min(0).default(def).describe(`${what} (ms, 0 = none)`);

export const serverSectionSchema = z
  .strictObject({
    host: z.string().min(1).default('127.0.0.1').describe('listen address'),
    port: z.int().min(0).max(65535).default(8000).describe('listen port (0 = any free port)'),
    maxBodyBytes: z
      .int()
      .min(1)
      .default(4 * 1024 * 1024)
      .describe('largest accepted request body (bytes); larger → 413'),
    maxJsonKeys: z
      .int()
      .min(1)
      .default(DEFAULT_MAX_JSON_KEYS)
      .describe(
        'most object keys in a request body, counted by a byte scan before the body is parsed; more → 413 ' +
          '(parsing and walking hundreds of thousands of keys blocks the event loop for seconds). The default ' +
          'covers 2,048 messages of 8 keys each plus 128 tool schemas',
      ),
    maxInflightBodyBytes: z
      .int()
      .min(1)
      .default(DEFAULT_MAX_INFLIGHT_BODY_BYTES)
      .describe(
        'request-body bytes admitted at once, counted by admission before a body is read (its ' +
          '`content-length`; a chunked body as it arrives) until its request ends, valid metaserver calls ' +
          'included; a request that does not fit waits in the admission queue (`scheduling.admission`), a ' +
          'body that outgrows it while arriving → 503. At least `maxBodyBytes`; each body byte costs about 5 ' +
          'bytes of memory while its request runs',
      ),
    bodyReservationBytes: z
      .int()
      .min(0)
      .default(DEFAULT_BODY_RESERVATION_BYTES)
      .describe(
        'most of a declared body (`content-length`) counted against `maxInflightBodyBytes` before it ' +
          'arrives; the rest is counted as it arrives, so a socket that declares a large body and trickles ' +
          'it holds only what it sent plus this',
      ),
    clientBodyShare: z
      .number()
      .gt(0)
      .max(1)
      .default(0.25)
      .describe(
        'fraction of `maxInflightBodyBytes` one client may hold (its queued requests included); more → 429 ' +
          'at once (1 = no share: requests wait in the admission queue instead). ' +
          'The client is the API key when `apiKeys` are set, else the `tenantIsolation` header, else the ' +
          'remote address (behind a proxy that is the proxy: set a tenant header or raise this)',
      ),
    minUploadBytesPerSecond: z
      .int()
      .min(0)
      .default(4096)
      .describe(
        'slowest request-body upload accepted, measured over each `uploadRateWindowMs` once a body has ' +
          'not arrived in one piece; slower → 408 `upload_too_slow`, the connection closed and its share ' +
          'of the body budget returned at once (0 = no minimum)',
      ),
    uploadRateWindowMs: z
      .int()
      .min(100)
      .default(10_000)
      .describe('the window `minUploadBytesPerSecond` is measured over (ms)'),
    apiKeys: z
      .array(z.string().min(1))
      .default([])
      .describe(
        'accepted `Authorization: Bearer` keys on the `/v1/*` client routes; empty = no authentication',
      ),
    tenantIsolation: z
      .string()
      .regex(TENANT_ISOLATION, "expected 'off', 'api-key' or 'header:<name>'")
      .default('off')
      .describe(
        'per-tenant prefix-cache isolation: `api-key` (the bearer key is the tenant; needs `apiKeys`) or ' +
          '`header:<name>` (a header set by a trusted front, e.g. `header:x-tenant-id`) sets `cache_salt` = ' +
          'HMAC-SHA256(secret, tenant) on every engine leg, replacing a client-sent one, and keys the ' +
          "prefix-affinity index with it, so one tenant cannot probe another's cached prompts. `off` (default: " +
          'vLLM V0 and engines without `cache_salt` refuse the field, and tenants sharing a system prompt lose ' +
          "each other's cache hits) forwards a client's own `cache_salt` unchanged",
      ),
    tenantSaltSecretEnv: z
      .string()
      .min(1)
      .optional()
      .describe(
        'name of the environment variable holding the HMAC secret of `tenantIsolation` (unset variable = ' +
          'start-up error); give every coordinator replica the same one so a tenant keeps one salt (and its ' +
          'cache) across replicas and restarts. Unset: a random per-process secret',
      ),
    publicUrl: z
      .url()
      .optional()
      .describe(
        'URL engines use to reach this coordinator (the direct-trigger metaserver is `<publicUrl>/v1/metaserver/<per-attempt token>`); ' +
          'default: the bound URL; required when that is a wildcard or loopback address remote decodes cannot call',
      ),
    shutdownGraceMs: z
      .int()
      .min(0)
      .default(10_000)
      .describe(
        '`motor coordinator` on SIGTERM/SIGINT: new requests get 503 (`connection: close`), those in flight get ' +
          'this long to finish (ms), the rest are cut; one `shutdown` log line tells how it went (0 = cut at once)',
      ),
    headersTimeoutMs: limitMs(
      D.headersTimeoutMs,
      "time to receive a request's headers, counted from the connection's start (a connection that sends " +
        'nothing gets 408 and is closed); at most `requestTimeoutMs`',
    ),
    requestTimeoutMs: limitMs(
      D.requestTimeoutMs,
      'time to receive a whole request, body included (408 and close); a response streamed after it is not cut',
    ),
    keepAliveTimeoutMs: limitMs(
      D.keepAliveTimeoutMs,
      'idle time between requests on a kept-alive connection (Node closes it up to 1 s later)',
    ),
    idleTimeoutMs: limitMs(
      D.idleTimeoutMs,
      'socket inactivity after which a connection is closed, except while a response (e.g. a silent ' +
        'generation) is in progress',
    ),
    maxConnections: z
      .int()
      .min(0)
      .default(D.maxConnections)
      .describe(
        'open client connections (0 = no cap); at it the oldest connection that has sent no request yet is ' +
          'closed to make room, else a new one is answered 503 `too_many_connections` and closed; up to 32 ' +
          'more are let in for `/health`, `/ready` and `/metrics` only. Shed connections are counted in ' +
          '`motor_connections_shed_total`. Keep it under the file-descriptor limit minus the upstream pools',
      ),
    maxConnectionsPerSource: z
      .int()
      .min(0)
      .default(1000)
      .describe(
        'open connections one remote address may hold (0 = no limit); more → raw 503, counted. Behind a ' +
          'load balancer every client shares its address: raise it or set 0',
      ),
    instanceErrorsToClients: z
      .boolean()
      .default(false)
      .describe(
        "client error messages name the failing instance and carry its engine's 5xx text (false: a " +
          'generic message per error code; the log and the management API keep the full one). For a ' +
          'private deployment debugging its fleet',
      ),
    cors: corsSectionSchema,
  })
  .superRefine((server, ctx) => {
    const problem = serverLimitsProblem(server);
    if (problem !== null) ctx.addIssue({ code: 'custom', path: ['headersTimeoutMs'], message: problem });
    if (server.maxInflightBodyBytes < server.maxBodyBytes)
      ctx.addIssue({
        code: 'custom',
        path: ['maxInflightBodyBytes'],
        message: `must be at least maxBodyBytes (${server.maxBodyBytes})`,
      });
    if (server.clientBodyShare * server.maxInflightBodyBytes < server.maxBodyBytes)
      ctx.addIssue({
        code: 'custom',
        path: ['clientBodyShare'],
        message: `clientBodyShare × maxInflightBodyBytes must be at least maxBodyBytes (${server.maxBodyBytes})`,
      });
    if (server.tenantIsolation === 'api-key' && server.apiKeys.length === 0)
      ctx.addIssue({ code: 'custom', path: ['tenantIsolation'], message: "'api-key' needs server.apiKeys" });
  })
  .prefault({})
  .describe('the OpenAI-compatible listener');

/** The secret of `tenantIsolation` from `tenantSaltSecretEnv` (undefined: none configured), or a one-line problem. */
export function tenantSaltSecret(
  server: { tenantSaltSecretEnv?: string | undefined },
  env: NodeJS.ProcessEnv,
): { secret?: string; problem?: string } {
  const name = server.tenantSaltSecretEnv;
  if (name === undefined) return {};
  const secret = env[name];
  if (secret === undefined || secret === '')
    return { problem: `server.tenantSaltSecretEnv: environment variable ${name} is unset or empty` };
  return { secret };
}

type ServerSection = z.output<typeof serverSectionSchema>;

/** Admission's body-budget options from the `server` section. */
export function bodyBudget(server: ServerSection): {
  maxInflightBodyBytes: number;
  bodyReservationBytes: number;
  maxClientBodyBytes: number;
} {
  return {
    maxInflightBodyBytes: server.maxInflightBodyBytes,
    bodyReservationBytes: server.bodyReservationBytes,
    // 1: one client may hold all of it, i.e. no share (an over-share request is refused, not queued)
    maxClientBodyBytes:
      server.clientBodyShare === 1
        ? Infinity
        : Math.floor(server.clientBodyShare * server.maxInflightBodyBytes),
  };
}

/** The gateway's minimum upload rate, or undefined when `minUploadBytesPerSecond` is 0. */
export function minUploadRate(
  server: ServerSection,
): { bytesPerSecond: number; windowMs: number } | undefined {
  return server.minUploadBytesPerSecond > 0
    ? { bytesPerSecond: server.minUploadBytesPerSecond, windowMs: server.uploadRateWindowMs }
    : undefined;
}
