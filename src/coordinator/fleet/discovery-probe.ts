import { Agent, request } from 'undici';
import type { ResolvedInstance } from '../../config/coordinator-config.js';
import { parseSglangServerInfo, SGLANG_SERVER_INFO_PATHS } from '../../engine-adapters/sglang-server-info.js';
import { parseModelList, parseProxyInfo, type DiscoveryProbe } from './discovery-reconcile.js';

/** GET `path` on `base` as JSON; throws with a one-line reason (status, timeout, not JSON). */
export type JsonGetter = (
  base: string,
  path: string,
  signal: AbortSignal,
  headers: Record<string, string>,
) => Promise<unknown>;

/**
 * Reads an instance's own description, every request bounded by `timeoutMs`. Never throws.
 * `apiKey`: the engine's key in direct mode (vLLM guards `/v1/*`, SGLang every route but health).
 */
export async function probeInstance(
  instance: ResolvedInstance,
  get: JsonGetter,
  timeoutMs: number,
  apiKey?: string,
): Promise<DiscoveryProbe> {
  const headers: Record<string, string> =
    apiKey !== undefined && instance.mode === 'direct' ? { authorization: `Bearer ${apiKey}` } : {};
  const read = async <T>(path: string, parse: (json: unknown) => T | null): Promise<T> => {
    const parsed = parse(await get(instance.url, path, AbortSignal.timeout(timeoutMs), headers));
    if (parsed === null) throw new Error(`GET ${path}: unexpected body`);
    return parsed;
  };
  // The proxy's pass-through serves its engine's `/v1/models`; vLLM has no other source (its
  // `/server_info` is registered only with VLLM_SERVER_DEV_MODE and holds no role:
  // vllm-project/vllm vllm/entrypoints/serve/instrumentator/__init__.py
  // `register_instrumentator_api_routers`, 2026 index versions).
  const models = read('/v1/models', parseModelList).catch(() => null);
  if (instance.mode === 'proxy') {
    const [info, listed] = await Promise.all([settle(read('/v1/motor/info', parseProxyInfo)), models]);
    return { kind: 'proxy', ...info, models: listed };
  }
  if (instance.engine === 'sglang') {
    const [info, listed] = await Promise.all([settle(sglangServerInfo(read)), models]);
    return { kind: 'sglang', ...info, models: listed };
  }
  return { kind: 'engine', models: await models };
}

/** `/server_info`, else the older `/get_server_info` (SGLANG_SERVER_INFO_PATHS). */
async function sglangServerInfo(
  read: <T>(path: string, parse: (json: unknown) => T | null) => Promise<T>,
): Promise<NonNullable<ReturnType<typeof parseSglangServerInfo>>> {
  let last: unknown;
  for (const path of SGLANG_SERVER_INFO_PATHS) {
    try {
      return await read(path, parseSglangServerInfo);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

async function settle<T>(p: Promise<T>): Promise<{ info: T | null; error: string | null }> {
  try {
    return { info: await p, error: null };
  } catch (err) {
    return { info: null, error: (err as Error).message || String(err) };
  }
}

/** The HTTP getter discovery uses: its own small pool, so it never queues behind client traffic. */
export function httpJsonGetter(): { get: JsonGetter; close(): Promise<void> } {
  const agent = new Agent({ keepAliveTimeout: 10_000, connections: 2 });
  return {
    get: async (base, path, signal, headers) => {
      const res = await request(`${base}${path}`, { method: 'GET', headers, dispatcher: agent, signal });
      const text = await res.body.text();
      if (res.statusCode < 200 || res.statusCode > 299)
        throw new Error(`GET ${path}: HTTP ${res.statusCode}`);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new Error(`GET ${path}: not JSON`);
      }
    },
    close: () => agent.close(),
  };
}
