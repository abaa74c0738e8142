import { Prng, deriveSeed } from './prng.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One request of a workload: what to send, independent of the target. */
export interface BenchRequest {
  messages: ChatMessage[];
  maxTokens: number;
  /** shared-prefix only: conversation id and turn (0-based), for reports and tests. */
  conversation?: number;
  turn?: number;
}

export const WORKLOAD_NAMES = ['short-chat', 'long-prompt', 'shared-prefix'] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export interface WorkloadOptions {
  seed: number;
  /** Output length per request; default per workload (64, 16, 64). */
  maxTokens?: number;
  /**
   * Approximate prompt length in tokens (≈ words): the user prompt for short-chat / long-prompt
   * (each request draws uniformly from 0.5×–1.5×), the shared system prompt for shared-prefix.
   * Defaults: 40, 3000, 2000.
   */
  promptTokens?: number;
  /** shared-prefix: conversations in flight per cycle (default 8). */
  conversations?: number;
  /** shared-prefix: turns per conversation before it is replaced by a new one (default 4). */
  turns?: number;
}

export interface Workload {
  /** A built-in workload, or a replayed trace (mooncake-trace.ts). */
  name: WorkloadName | 'mooncake-trace';
  /** The effective settings (defaults filled in), for the JSON report. */
  settings: Required<Omit<WorkloadOptions, 'conversations' | 'turns'>> & {
    conversations?: number;
    turns?: number;
    /** Replayed traces: the number of records. */
    traceRecords?: number;
  };
  /**
   * Request number `index` of stream `stream` (0 = measured run, 1 = warm-up). Pure: the same
   * (seed, stream, index) always gives the same request, whatever the concurrency or target.
   */
  request(index: number, stream?: number): BenchRequest;
}

/**
 * Common English words; with a leading space each is exactly one cl100k_base token (the simulator's
 * tokenizer; checked in mooncake-trace.test.ts), so a prompt of N words is close to N tokens.
 */
export const WORDS = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one ' +
  'had by word but not what all were we when your can said there use an each which she do how their ' +
  'if will up other about out many then them these so some her would make like him into time has ' +
  'look two more write go see number no way could people my than first water been call who oil its ' +
  'now find long down day did get come made may part over new sound take only little work know place ' +
  'year live me back give most very after thing our just name good sentence man think say great where ' +
  'help through much before line right too mean old any same tell boy follow came want show also ' +
  'around form three small set put end does another well large must big even such because turn here ' +
  'why ask went men read need land different home us move try kind hand picture again change off play ' +
  'spell air away animal house point page letter mother answer found study still learn should world ' +
  'high every near add food between own below country plant last school father keep tree never start ' +
  'city earth eye light thought head under story saw left few while along might close something seem ' +
  'next hard open example begin life always those both paper together got group often run important'
).split(' ');

function words(rng: Prng, n: number): string {
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) out[i] = WORDS[Math.floor(rng.next() * WORDS.length)]!;
  return out.join(' ');
}

function around(rng: Prng, mean: number): number {
  return Math.max(1, rng.int(Math.ceil(mean * 0.5), Math.floor(mean * 1.5)));
}

const DEFAULTS: Record<WorkloadName, { maxTokens: number; promptTokens: number }> = {
  'short-chat': { maxTokens: 64, promptTokens: 40 },
  'long-prompt': { maxTokens: 16, promptTokens: 3000 },
  'shared-prefix': { maxTokens: 64, promptTokens: 2000 },
};

export function createWorkload(name: WorkloadName, opts: WorkloadOptions): Workload {
  const seed = opts.seed >>> 0;
  const maxTokens = opts.maxTokens ?? DEFAULTS[name].maxTokens;
  const promptTokens = opts.promptTokens ?? DEFAULTS[name].promptTokens;
  if (name === 'short-chat' || name === 'long-prompt') {
    const kind = name === 'short-chat' ? 1 : 2;
    return {
      name,
      settings: { seed, maxTokens, promptTokens },
      request(index, stream = 0) {
        const rng = new Prng(deriveSeed(seed, kind, stream, index));
        // A per-request opening makes every prompt distinct from its first token block, so
        // long-prompt measures real prefill rather than prefix-cache hits.
        const content = `Request ${stream}-${index}: ${words(rng, around(rng, promptTokens))}`;
        return { messages: [{ role: 'user', content }], maxTokens };
      },
    };
  }
  const conversations = opts.conversations ?? 8;
  const turns = opts.turns ?? 4;
  if (conversations < 1 || turns < 1) throw new Error('shared-prefix needs conversations ≥ 1 and turns ≥ 1');
  const system = `You are a helpful assistant. ${words(new Prng(deriveSeed(seed, 3)), promptTokens)}`;
  const perCycle = conversations * turns;
  return {
    name,
    settings: { seed, maxTokens, promptTokens, conversations, turns },
    request(index, stream = 0) {
      // Turns advance round-robin over the conversations of a cycle: turn t of every conversation
      // is sent before turn t+1 of any, so the previous turn has usually finished by then.
      const cycle = Math.floor(index / perCycle);
      const within = index % perCycle;
      const turn = Math.floor(within / conversations);
      const conversation = cycle * conversations + (within % conversations);
      const messages: ChatMessage[] = [{ role: 'system', content: system }];
      for (let t = 0; t <= turn; t++) {
        const rng = new Prng(deriveSeed(seed, 4, stream, conversation, t));
        messages.push({ role: 'user', content: words(rng, around(rng, 40)) });
        // The previous answer is synthetic (seeded, max_tokens words), not the target's reply, so
        // every target sees exactly the same prompts.
        if (t < turn) messages.push({ role: 'assistant', content: words(rng, maxTokens) });
      }
      return { messages, maxTokens, conversation, turn };
    },
  };
}
