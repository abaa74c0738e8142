import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { prefillShapedBody } from '../coordinator/dispatch/transport/leg-request.js';
import {
  engineAdapterFor,
  parseSglangServerInfo,
  resolveSglangBootstrapPort,
  SGLANG_SERVER_INFO_PATHS,
  urlPort,
  type LegKind,
  type MetaserverKvFields,
  type SglangBootstrapPort,
} from '../engine-adapters/index.js';
import {
  bootstrapAddressFromUrl,
  MOTOR_DISPATCH_SCHEMA_VERSION,
  PREFILL_RESULT_OBJECT,
  type BootstrapAddress,
  type MotorDispatch,
  type PrefillResult,
} from '../protocol/index.js';
import { callError, engineCall, transportError, type CallResult } from './engine-call.js';
import type { MetaserverSeen, PrefillSeen } from './verify-checks.js';
import type { VerifyPair, VerifyTarget } from './verify-targets.js';

/** What one probe through a pair saw on the wire (the checks judge it). */
export interface PairObservation {
  prefill: PrefillSeen | { error: string };
  /** The decode's usage (null: none), or why the decode gave no answer. */
  decode: { usage: unknown } | { error: string };
  metaserver?: MetaserverSeen | { error: string };
  bootstrap?: SglangBootstrapPort;
}

export interface ProbeBounds {
  maxTokens: number;
  timeoutMs: number;
  /** Host the probe's metaserver binds and advertises to layer-wise decodes. */
  metaserverHost: string;
}

/**
 * A prompt long enough to fill a few KV blocks (block sizes 16–128), so a decode that recomputes it
 * reports far fewer cached tokens than prompt tokens. Never client traffic: ids start `motor-verify-`.
 */
const PROBE_PROMPT = Array.from(
  { length: 48 },
  (_, i) => `motor verify probe sentence ${i}: the decode must read this from the prefill's KV cache.`,
).join(' ');

function ids(pair: VerifyPair, role: 'prefill' | 'decode', mode: string): MotorDispatch {
  const root = `motor-verify-${randomUUID()}`;
  return {
    schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
    root_request_id: root,
    engine_request_id: `${root}#a1`,
    pair_id: `${root}-pair`,
    attempt_seq: 1,
    role,
    dispatch_mode: mode,
    endpoints: {
      prefill: { instance_id: pair.prefill.instance.index, endpoint_id: 0, url: pair.prefill.url },
      decode: { instance_id: pair.decode.instance.index, endpoint_id: 0, url: pair.decode.url },
    },
  };
}

const decodeOf = (prefill: MotorDispatch): MotorDispatch => ({ ...prefill, role: 'decode' });

function modelOf(pair: VerifyPair, models: ReadonlyMap<string, string>): string {
  return models.get(pair.prefill.id) ?? models.get(pair.decode.id) ?? 'default';
}

async function leg(
  to: VerifyTarget,
  kind: LegKind,
  input: Parameters<ReturnType<typeof engineAdapterFor>['buildEngineRequest']>[1],
  timeoutMs: number,
): Promise<CallResult> {
  const adapter = engineAdapterFor(to.instance.engine);
  const built = adapter.buildEngineRequest(kind, input);
  if (!built.ok) throw new Error(`Motor refused its own probe: ${built.message}`);
  return engineCall(to, 'POST', '/v1/completions', { body: built.body, headers: built.headers, timeoutMs });
}

function prefillSeen(r: CallResult): PrefillSeen | { error: string } {
  if (r.status !== 200 || r.json === null) return { error: callError('prefill POST /v1/completions', r) };
  const choice = (r.json.choices as Array<{ finish_reason?: unknown }> | undefined)?.[0];
  return {
    params: r.json.kv_transfer_params,
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
  };
}

function decodeSeen(r: CallResult): { usage: unknown } | { error: string } {
  if (r.status !== 200 || r.json === null) return { error: callError('decode POST /v1/completions', r) };
  return { usage: r.json.usage ?? null };
}

/** Handoff: the prefill with Motor's shaping, then the decode with its params verbatim. */
async function handoffProbe(pair: VerifyPair, model: string, b: ProbeBounds): Promise<PairObservation> {
  const body = { model, prompt: PROBE_PROMPT, max_tokens: b.maxTokens, stream: false };
  const dispatch = ids(pair, 'prefill', 'prefill_handoff_decode');
  let pre: CallResult;
  try {
    pre = await leg(
      pair.prefill,
      'handoff_prefill',
      { body: prefillShapedBody(body), dispatch },
      b.timeoutMs,
    );
  } catch (err) {
    const error = transportError(pair.prefill.url, err);
    return { prefill: { error }, decode: { error: 'no prefill answer' } };
  }
  const prefill = prefillSeen(pre);
  if ('error' in prefill) return { prefill, decode: { error: 'no prefill answer' } };
  const parsed = engineAdapterFor('vllm').parsePrefillResponse('handoff_prefill', pre.json);
  if (!parsed.ok) return { prefill, decode: { error: parsed.message } };
  const result: PrefillResult = {
    object: PREFILL_RESULT_OBJECT,
    schema_version: MOTOR_DISPATCH_SCHEMA_VERSION,
    root_request_id: dispatch.root_request_id,
    engine_request_id: dispatch.engine_request_id,
    pair_id: dispatch.pair_id,
    attempt_seq: 1,
    status: parsed.skipped ? 'skipped' : 'completed',
    handoff_mode: 'handoff',
    payload: parsed.payload,
    usage: parsed.usage,
    expires_at_ms: null,
  };
  try {
    const dec = await leg(
      pair.decode,
      'handoff_decode',
      { body, dispatch: decodeOf(dispatch), prefillResult: result },
      b.timeoutMs,
    );
    return { prefill, decode: decodeSeen(dec) };
  } catch (err) {
    return { prefill, decode: { error: transportError(pair.decode.url, err) } };
  }
}

/** SGLang bootstrap: both legs at once, through the address Motor resolves for the prefill. */
async function bootstrapProbe(pair: VerifyPair, model: string, b: ProbeBounds): Promise<PairObservation> {
  const resolved = await bootstrapPortOf(pair.prefill, b.timeoutMs);
  const bootstrap: BootstrapAddress = bootstrapAddressFromUrl(pair.prefill.url, { port: resolved.port });
  const body = { model, prompt: PROBE_PROMPT, max_tokens: b.maxTokens, stream: false };
  const dispatch = ids(pair, 'prefill', 'concurrent_engine_sync');
  const [pre, dec] = await Promise.allSettled([
    leg(
      pair.prefill,
      'bootstrap_prefill',
      { body: prefillShapedBody(body), dispatch, bootstrap },
      b.timeoutMs,
    ),
    leg(pair.decode, 'bootstrap_decode', { body, dispatch: decodeOf(dispatch), bootstrap }, b.timeoutMs),
  ]);
  return {
    bootstrap: resolved,
    prefill:
      pre.status === 'fulfilled'
        ? prefillSeen(pre.value)
        : { error: transportError(pair.prefill.url, pre.reason) },
    decode:
      dec.status === 'fulfilled'
        ? decodeSeen(dec.value)
        : { error: transportError(pair.decode.url, dec.reason) },
  };
}

/** The bootstrap port Motor's direct mode would use (sglang-server-info.ts), from the engine's server info. */
async function bootstrapPortOf(prefill: VerifyTarget, timeoutMs: number): Promise<SglangBootstrapPort> {
  let info = null;
  for (const path of SGLANG_SERVER_INFO_PATHS) {
    try {
      const r = await engineCall(prefill, 'GET', path, { timeoutMs });
      if (r.status === 200) {
        info = parseSglangServerInfo(r.json);
        break;
      }
    } catch {
      break; // unreachable: the probe's legs say so
    }
  }
  return resolveSglangBootstrapPort(info, prefill.instance.bootstrapPort ?? null, {
    port: urlPort(prefill.url),
    onHttpPort: prefill.instance.bootstrapOnHttpPort === true,
  });
}

/**
 * Layer-wise trigger: the decode goes first with a metaserver URL served here; its call is recorded
 * and runs the prefill with the decode's KV fields, as Motor's metaserver route does.
 */
async function triggerProbe(pair: VerifyPair, model: string, b: ProbeBounds): Promise<PairObservation> {
  const body = { model, prompt: PROBE_PROMPT, max_tokens: b.maxTokens, stream: false };
  const dispatch = ids(pair, 'prefill', 'concurrent_engine_sync');
  let metaserver: MetaserverSeen | { error: string } = { error: 'the decode never called the metaserver' };
  let prefill: PrefillSeen | { error: string } = { error: 'no metaserver call, so no prefill' };
  let prefillDone: Promise<void> = Promise.resolve();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      let fields: unknown;
      try {
        fields = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        metaserver = { error: 'the metaserver call is not JSON' };
        return;
      }
      metaserver = { body: fields, issuedId: dispatch.engine_request_id };
      prefillDone = leg(
        pair.prefill,
        'trigger_prefill',
        { body, dispatch, triggerKv: fields as MetaserverKvFields },
        b.timeoutMs,
      ).then(
        (r) => {
          prefill =
            r.status === 200 ? { params: null, finishReason: null } : { error: callError('prefill', r) };
        },
        (err: unknown) => {
          prefill = { error: transportError(pair.prefill.url, err) };
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, b.metaserverHost, resolve));
  const { port } = server.address() as AddressInfo;
  const host = b.metaserverHost.includes(':') ? `[${b.metaserverHost}]` : b.metaserverHost;
  try {
    const dec = await leg(
      pair.decode,
      'trigger_decode',
      { body, dispatch: decodeOf(dispatch), metaserverUrl: `http://${host}:${port}/v1/metaserver` },
      b.timeoutMs,
    ).then(decodeSeen, (err: unknown) => ({ error: transportError(pair.decode.url, err) }));
    await prefillDone;
    return { prefill, decode: dec, metaserver };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** One probe through a pair, by its flow. */
export function probePair(
  pair: VerifyPair,
  models: ReadonlyMap<string, string>,
  bounds: ProbeBounds,
): Promise<PairObservation> {
  const model = modelOf(pair, models);
  if (pair.profile === 'handoff') return handoffProbe(pair, model, bounds);
  if (pair.profile === 'bootstrap') return bootstrapProbe(pair, model, bounds);
  return triggerProbe(pair, model, bounds);
}
