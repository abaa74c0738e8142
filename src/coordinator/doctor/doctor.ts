import { randomInt } from 'node:crypto';
import type { KvHashGroup } from '../../config/kv-hash-section.js';
import type { KvEventsHub } from '../../kv-events/kv-events-hub.js';
import { BLOCK_HASH_ALGOS, BlockHasher, eventBlockHash } from '../../kv-hash/index.js';
import type { TokenizeInput } from '../../model-tokenizer/index.js';
import type { Instance, InstanceSource } from '../fleet/instance-source.js';
import type { PromptBlockKeys } from '../kv-routing/prompt-block-keys.js';
import type { Upstreams } from '../fleet/upstream.js';
import type { CachedTokensSamples } from './cached-tokens-samples.js';
import {
  blockHashesCheck,
  blockSizeCheck,
  cachedTokensCheck,
  eventStreamCheck,
  skipped,
  tokensCheck,
  type CheckResult,
  type HashProbe,
} from './doctor-checks.js';
import { engineCacheConfig, engineTokens, probeCompletion, type ProbeInput } from './engine-probe.js';

export interface InstanceReport {
  instance: string;
  engine: string;
  /** The `kvHash` group covering it (null: none). */
  group: string | null;
  checks: CheckResult[];
}

export interface DoctorReport {
  /** ISO time the checks ran. */
  at: string;
  /** Some check of some instance found drift. */
  drift: boolean;
  instances: InstanceReport[];
}

export interface DoctorDeps {
  groups: readonly KvHashGroup[];
  source: Pick<InstanceSource, 'all'>;
  upstreams: Pick<Upstreams, 'request'>;
  /** The KV events hub (null: no instance publishes events). */
  hub: () => KvEventsHub | null;
  /** The groups' tokenizers (null: precise prefix routing is off). */
  keys: () => PromptBlockKeys | null;
  samples: CachedTokensSamples;
  /** Bound on each engine call (ms). */
  probeTimeoutMs?: number;
  /** How long the probe's blocks are awaited in the KV event index (ms). */
  eventWaitMs?: number;
  /** Interval of the index checks while waiting (there is no per-batch event to await). */
  pollMs?: number;
  nowMs?: () => number;
}

/** The probe conversation (chat template + tokenizer) and prompt (tokenizer alone). */
export const PROBE_MESSAGES = [
  { role: 'system', content: 'You are a probe of motor doctor. Answer with one word.' },
  { role: 'user', content: 'Does the router render this conversation as you do? Größe, 日本語, 42.' },
] as const;
export const PROBE_PROMPT = 'motor doctor probe: the quick brown fox, Größe 日本語 12345.';

/** Token ids of the block-hash probe: random, so the engine has never cached them. */
const PROBE_TOKEN_RANGE = [1000, 20_000] as const;

/**
 * `motor doctor`'s checks per instance (docs/coordinator.md, "motor doctor"): Motor's tokenizer and
 * chat template against the engine's, the block size and block hashes the engine's KV events carry
 * against the instance's `kvHash` group, the event stream's health, and the cached tokens predicted
 * against those reported over recent requests. Sends each direct-mode instance at most one tokenize
 * call per probe and one one-token completion (whose blocks it caches).
 */
export class Doctor {
  private readonly now: () => number;

  constructor(private readonly deps: DoctorDeps) {
    this.now = deps.nowMs ?? Date.now;
  }

  async run(): Promise<DoctorReport> {
    const at = new Date(this.now()).toISOString();
    const instances = await Promise.all(this.deps.source.all().map((i) => this.instance(i)));
    const drift = instances.some((r) => r.checks.some((c) => c.verdict === 'drift'));
    // skipped checks (a feature the instance does not use) never count as drift
    return { at, drift, instances };
  }

  /** As PromptBlockKeys.groupOf: its listed instances, else every server of a model (empty = any). */
  private groupOf(instance: Instance): KvHashGroup | undefined {
    return this.deps.groups.find((g) =>
      g.instances !== undefined
        ? g.instances.includes(instance.id)
        : instance.models.length === 0 || instance.models.some((m) => g.models.includes(m)),
    );
  }

  private async instance(instance: Instance): Promise<InstanceReport> {
    const group = this.groupOf(instance);
    const hub = this.deps.hub();
    const status = hub?.status().find((s) => s.instance === instance.id);
    const base = { instance: instance.id, engine: instance.engine, group: group?.name ?? null };
    if (group === undefined) {
      // Precise prefix routing is off for this instance: KV events and hashing are optional then.
      const stream =
        status === undefined
          ? skipped('event_stream', 'no kvEvents.endpoint for this instance: KV events are optional')
          : eventStreamCheck(status, this.now(), instance.id);
      const none = 'no kvHash group covers this instance: its prompts are not hashed (approximate routing)';
      return { ...base, checks: [stream, skipped('block_size', none)] };
    }
    const model = instance.models.find((m) => group.models.includes(m)) ?? group.models[0]!;
    const timeoutMs = this.deps.probeTimeoutMs ?? 5_000;
    const direct = instance.mode === 'direct';
    const metrics = direct ? await engineCacheConfig(this.deps.upstreams, instance, timeoutMs) : null;
    const where = { group: group.name, tokenizerPath: group.tokenizer.path };
    const probeTokens = async (
      check: 'tokenizer' | 'chat_template',
      motor: TokenizeInput,
      engine: ProbeInput,
    ) =>
      direct
        ? tokensCheck(
            check,
            await this.motorTokens(group.name, motor),
            await engineTokens(this.deps.upstreams, instance, model, engine, timeoutMs),
            where,
          )
        : notDirect(check);
    const tokenizer = await probeTokens(
      'tokenizer',
      { kind: 'prompt', prompt: PROBE_PROMPT },
      { prompt: PROBE_PROMPT },
    );
    const template = await probeTokens(
      'chat_template',
      { kind: 'chat', chat: { messages: [...PROBE_MESSAGES] } },
      { messages: PROBE_MESSAGES },
    );
    const seen = status?.blockSize ?? null;
    const hashes =
      !direct || hub === null
        ? hub === null
          ? skipped('block_hashes', 'no instance publishes KV events: nothing to compare hashes with')
          : notDirect('block_hashes')
        : blockHashesCheck(
            {
              ...(await this.hashProbe(
                instance,
                model,
                group,
                hub,
                Math.max(seen ?? 0, metrics?.blockSize ?? 0),
              )),
              engineAlgo: metrics?.hashAlgo ?? null,
            },
            group.blockHash,
            group.name,
          );
    // the probe's events may be the first this instance sent: the stream and block size are read after it
    const after = hub?.status().find((s) => s.instance === instance.id);
    const events = after?.blockSize ?? null;
    const stream = eventStreamCheck(after, this.now(), instance.id);
    return {
      ...base,
      checks: [
        tokenizer,
        template,
        blockSizeCheck(
          group.blockHash.blockSize,
          { events, metrics: metrics?.blockSize ?? null },
          group.name,
        ),
        hashes,
        stream,
        cachedTokensCheck(this.deps.samples.of(instance.id), group.name),
      ],
    };
  }

  private async motorTokens(group: string, input: TokenizeInput): Promise<Uint32Array | { error: string }> {
    const tokenizer = this.deps.keys()?.tokenizer(group);
    if (tokenizer === undefined) return { error: `the tokenizer of kvHash group '${group}' is not running` };
    try {
      return (await tokenizer.tokenize(input)).tokenIds;
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  /**
   * Sends a prompt of random token ids (no tokenizer involved: only the hash settings matter) and
   * waits for the blocks Motor predicts to appear in the index under this instance. When they do not,
   * the other algorithms and the engine's block size are tried on the same tokens: a match names the fix.
   */
  private async hashProbe(
    instance: Instance,
    model: string,
    group: KvHashGroup,
    hub: KvEventsHub,
    engineBlockSize: number,
  ): Promise<HashProbe> {
    const { algo, blockSize, seed } = group.blockHash;
    const length = 2 * Math.max(blockSize, engineBlockSize) + 1;
    const ids = Array.from({ length }, () => randomInt(...PROBE_TOKEN_RANGE));
    const keysFor = (a: (typeof BLOCK_HASH_ALGOS)[number], size: number) =>
      new BlockHasher({ algo: a, blockSize: size, seed }).hashes(ids).map(eventBlockHash);
    const held = (keys: bigint[]) => (hub.index.prefixMatch(keys).get(instance.id) ?? 0) > 0;
    const batches = () => hub.status().find((s) => s.instance === instance.id)?.batches ?? 0;
    const predicted = keysFor(algo, blockSize);
    const before = batches();
    const error = await probeCompletion(
      this.deps.upstreams,
      instance,
      model,
      ids,
      this.deps.probeTimeoutMs ?? 5_000,
    );
    if (error !== null) return { found: false, matchedWith: null, batchesAfterProbe: 0, error };
    const alternatives = BLOCK_HASH_ALGOS.flatMap((a) =>
      [...new Set([blockSize, engineBlockSize])]
        .filter((size) => size > 0 && (a !== algo || size !== blockSize))
        .map((size) => ({ algo: a, blockSize: size, keys: keysFor(a, size) })),
    );
    const deadline = this.now() + (this.deps.eventWaitMs ?? 3_000);
    for (;;) {
      if (held(predicted)) return { found: true, matchedWith: null, batchesAfterProbe: batches() - before };
      const alt = alternatives.find((c) => held(c.keys));
      if (alt)
        return {
          found: false,
          matchedWith: { algo: alt.algo, blockSize: alt.blockSize },
          batchesAfterProbe: batches() - before,
        };
      if (this.now() >= deadline)
        return { found: false, matchedWith: null, batchesAfterProbe: batches() - before };
      await new Promise((r) => setTimeout(r, this.deps.pollMs ?? 20));
    }
  }
}

/** The engine probes go to the engine itself, which a proxy-mode instance keeps behind its proxy. */
function notDirect(check: CheckResult['check']): CheckResult {
  return skipped(check, 'instance in mode proxy: the coordinator does not call its engine directly');
}
