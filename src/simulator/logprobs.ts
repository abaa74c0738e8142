import { EOS_WORD, OUTPUT_VOCAB, prng } from './tokens.js';

/** One candidate token of a step: its text and log-probability. */
export interface Candidate {
  token: string;
  logprob: number;
}

/**
 * The simulator's deterministic log-probabilities (there is no model): for choice seed `seed` and
 * output step `step`, the sampled token gets a value in (-1.5, 0], and the step's top list is the
 * sampled token first (vLLM V1 puts the sampled token before the top-k, and the OpenAI server
 * takes the first `top_logprobs` entries: chat_completion/serving.py `_get_top_logprobs`), then
 * other vocabulary words, each lower than the one before. Rounded to 4 decimals.
 */
export function stepCandidates(seed: number, step: number, sampled: string, k: number): Candidate[] {
  const r = prng(Math.imul(seed | 0, 0x27d4eb2d) ^ Math.imul(step + 1, 0x165667b1));
  let lp = -round4(r() * 1.5);
  const out: Candidate[] = [{ token: sampled, logprob: lp }];
  let w = Math.floor(r() * EOS_WORD);
  while (out.length < k) {
    const token = OUTPUT_VOCAB.text[w]!;
    w = (w + 1) % EOS_WORD;
    if (token === sampled) continue;
    lp = round4(lp - 0.5 - r() * 0.5);
    out.push({ token, logprob: lp });
  }
  return out;
}

function round4(x: number): number {
  return Math.round(x * 1e4) / 1e4;
}

const utf8 = new TextEncoder();

/** Chat `choices[].logprobs.content[]` entry: token, logprob, bytes, top_logprobs (chat_completion/protocol.py). */
export function chatLogprobEntry(seed: number, step: number, token: string, top: number): string {
  const c = stepCandidates(seed, step, token, Math.max(1, top));
  const tops = top === 0 ? '' : c.map(candidateJson).join(',');
  return `{${candidateFields(c[0]!)},"top_logprobs":[${tops}]}`;
}

function candidateFields(c: Candidate): string {
  return `"token":${JSON.stringify(c.token)},"logprob":${c.logprob},"bytes":[${utf8.encode(c.token).join(',')}]`;
}

function candidateJson(c: Candidate): string {
  return `{${candidateFields(c)}}`;
}

/**
 * Completions logprobs of the given steps (vLLM completion/protocol.py CompletionLogProbs:
 * text_offset, token_logprobs, tokens, top_logprobs as {token: logprob}); `offset` is the text
 * length before the first of them.
 */
export function completionLogprobs(
  seed: number,
  firstStep: number,
  tokens: readonly string[],
  top: number,
  offset: number,
): string {
  const offsets: number[] = [];
  const lps: number[] = [];
  const tops: string[] = [];
  let at = offset;
  for (let i = 0; i < tokens.length; i++) {
    const c = stepCandidates(seed, firstStep + i, tokens[i]!, Math.max(1, top));
    offsets.push(at);
    at += tokens[i]!.length;
    lps.push(c[0]!.logprob);
    const dict: Record<string, number> = {};
    for (const x of c.slice(0, top)) dict[x.token] ??= x.logprob;
    tops.push(JSON.stringify(dict));
  }
  return (
    `{"text_offset":[${offsets.join(',')}],"token_logprobs":[${lps.join(',')}],` +
    `"tokens":${JSON.stringify(tokens)},"top_logprobs":[${tops.join(',')}]}`
  );
}
