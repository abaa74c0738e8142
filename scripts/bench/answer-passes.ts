/**
 * CPU per answer of the coordinator's per-answer byte work (issue 19, docs/BENCHMARKS.md "Answer
 * passes"): the relay's per-chunk path (`SseRelay.push` + the client request id rewrite, what
 * stream-relay.ts `clientFrames` runs) and, for a non-stream client served from a streamed leg
 * (`migration.nonStreamLegs: stream`), the assembly of the answer at `[DONE]` (`assembleAnswer`,
 * `rewriteResponseObject`, `JSON.stringify`). Two builds side by side in one process: this
 * checkout's `dist/` and `--baseline`'s, in interleaved batches (A, B, A, B, …); per build the
 * median over batches of CPU µs per answer (`process.cpuUsage`). Frames are shaped like `motor sim`'s
 * (src/simulator/sse.ts): a role frame, `--tokens` content frames (the last with finish_reason), a
 * usage frame and `[DONE]`, one frame per chunk.
 *
 *   npm run build && npx tsx scripts/bench/answer-passes.ts --baseline <built checkout> \
 *     [--tokens 16] [--answers 2000] [--batches 9]
 */
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    tokens: { type: 'string', default: '16' },
    answers: { type: 'string', default: '2000' },
    batches: { type: 'string', default: '9' },
  },
});
if (!values.baseline) {
  console.error('--baseline <dir of a built Motor checkout> is required');
  process.exit(2);
}
const tokens = Number(values.tokens);
const answers = Number(values.answers);
const batches = Number(values.batches);

interface Build {
  name: string;
  SseRelay: new (rw: { cachedTokens: number | null; stripTokenIds: boolean }) => {
    push(chunk: Buffer): Buffer | null;
  };
  rewriteResponseObject: (obj: Record<string, unknown>, rw: object) => boolean;
  assembleAnswer: (kind: 'chat' | 'completions', frames: Buffer) => Record<string, unknown> | null;
  attemptIdRewrite: (root: string, engine: string) => unknown;
  withClientRequestId: (buf: Buffer, rw: unknown) => Buffer;
}

async function load(name: string, root: string): Promise<Build> {
  const mod = async (p: string): Promise<Record<string, unknown>> =>
    (await import(pathToFileURL(join(resolve(root), 'dist', p)).href)) as Record<string, unknown>;
  const sse = await mod('coordinator/dispatch/sse-relay.js');
  const asm = await mod('coordinator/dispatch/assembled-answer.js');
  const ids = await mod('engine-adapters/client-request-id.js');
  return { name, ...sse, ...asm, ...ids } as unknown as Build;
}

const ROOT = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const ENGINE = `${ROOT}#a1`;
const WORDS = [
  ' the',
  ' coordinator',
  ' adds',
  ' very',
  ' little',
  ' latency',
  ',',
  ' "quoted"',
  ' café',
  '\n',
];
function frames(): string[] {
  const head = `data: {"id":"chatcmpl-${ENGINE}","object":"chat.completion.chunk","created":1764790000,"model":"motor-sim-7b","choices":[{"index":0,`;
  const out = [
    `${head}"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`,
  ];
  for (let i = 0; i < tokens; i++) {
    const w = JSON.stringify(WORDS[i % WORDS.length]);
    const fin = i === tokens - 1 ? '"length","stop_reason":null' : 'null';
    out.push(`${head}"delta":{"content":${w}},"logprobs":null,"finish_reason":${fin}}]}\n\n`);
  }
  const usage = { prompt_tokens: 12, total_tokens: 12 + tokens, completion_tokens: tokens };
  out.push(
    `data: ${JSON.stringify({ id: `chatcmpl-${ENGINE}`, object: 'chat.completion.chunk', created: 1764790000, model: 'motor-sim-7b', choices: [], usage })}\n\n`,
    'data: [DONE]\n\n',
  );
  return out;
}
const FRAMES = frames().map((f) => Buffer.from(f));

/** One answer through a build; `assemble`: the non-stream client's body, else the stream client's bytes. */
function answer(b: Build, chunks: Buffer[], assemble: boolean): string | number {
  const rw = { cachedTokens: null, stripTokenIds: true };
  const relay = new b.SseRelay(rw);
  const ids = b.attemptIdRewrite(ROOT, ENGINE);
  const sent: Buffer[] = [];
  let bytes = 0;
  for (const chunk of chunks) {
    const relayed = relay.push(chunk);
    if (relayed === null) continue;
    const out = b.withClientRequestId(relayed, ids);
    bytes += out.length;
    sent.push(out);
  }
  if (!assemble) return bytes;
  const obj = b.assembleAnswer('chat', Buffer.concat(sent))!;
  b.rewriteResponseObject(obj, rw);
  return JSON.stringify(obj);
}

/** CPU µs per answer of one batch (fresh chunk copies: the id rewrite works in place). */
function batch(b: Build, assemble: boolean): number {
  const inputs = Array.from({ length: answers }, () => FRAMES.map((f) => Buffer.from(f)));
  const t0 = process.cpuUsage();
  let sink = 0;
  for (const chunks of inputs) {
    const out = answer(b, chunks, assemble);
    sink += typeof out === 'string' ? out.length : out;
  }
  const t = process.cpuUsage(t0);
  if (sink === 0) throw new Error('no output');
  return (t.user + t.system) / answers;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

const cur = await load('this checkout', '.');
const base = await load('baseline', values.baseline);
// the same client bytes from both builds before timing anything
for (const assemble of [true, false]) {
  const [a, b] = [cur, base].map((x) =>
    answer(
      x,
      FRAMES.map((f) => Buffer.from(f)),
      assemble,
    ),
  );
  if (a !== b) throw new Error(`builds disagree (assemble ${assemble}): ${a} vs ${b}`);
}
console.log(
  `node ${process.version}, loadavg ${(await import('node:os'))
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
console.log(
  `${tokens} tokens, ${FRAMES.length} frames, ${answers} answers × ${batches} interleaved batches per build`,
);
for (const assemble of [true, false]) {
  const t = new Map<string, number[]>([
    [cur.name, []],
    [base.name, []],
  ]);
  for (const b of [cur, base]) batch(b, assemble); // warm-up
  for (let i = 0; i < batches; i++) {
    for (const b of i % 2 === 0 ? [cur, base] : [base, cur]) t.get(b.name)!.push(batch(b, assemble));
  }
  const c = median(t.get(cur.name)!);
  const bs = median(t.get(base.name)!);
  const what = assemble ? 'non-stream answer (relay + assembly)' : 'stream answer (relay only)';
  console.log(
    `${what}: this checkout ${c.toFixed(2)} µs, baseline ${bs.toFixed(2)} µs, ratio ${(c / bs).toFixed(2)}×` +
      `  [batches: ${t
        .get(cur.name)!
        .map((x) => x.toFixed(1))
        .join(' ')} | ${t
        .get(base.name)!
        .map((x) => x.toFixed(1))
        .join(' ')}]`,
  );
}
