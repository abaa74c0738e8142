import type { ChoiceOutput } from './answer.js';
import { chatLogprobEntry, completionLogprobs } from './logprobs.js';
import type { Ending, Usage } from './sse.js';
import { OUTPUT_VOCAB } from './tokens.js';

function endJson(end: Ending): string {
  return `"${end.finish}","stop_reason":${end.stopReason === null ? 'null' : JSON.stringify(end.stopReason)}`;
}

/** How the engine names things in a chat answer (from the profile). */
export interface ChatStyle {
  /** Delta / message keys of reasoning text: vLLM `reasoning` (older: also `reasoning_content`), SGLang `reasoning_content`. */
  reasoningKeys: readonly string[];
}

/** The text of step `i` of a choice (a word, a JSON piece, or a tool's name). */
export function stepText(c: ChoiceOutput, i: number): string {
  const nw = c.words.length;
  if (i < nw) return OUTPUT_VOCAB.text[c.words[i]!]!;
  const j = i - nw;
  if (c.tool !== null) return j === 0 ? c.tool.name : c.tool.args.pieces[j - 1]!;
  return c.json!.pieces[j]!;
}

/** The token ids of step `i`, comma-separated. */
function stepIds(c: ChoiceOutput, i: number): string {
  const nw = c.words.length;
  if (i < nw) return String(OUTPUT_VOCAB.ids[c.words[i]!]!);
  const j = i - nw;
  if (c.tool !== null) return (j === 0 ? c.tool.nameIds : c.tool.args.ids[j - 1]!).join(',');
  return c.json!.ids[j]!.join(',');
}

/**
 * SSE chunk templates framed like vLLM's OpenAI server: `data: {json}\n\n`, one event per engine
 * step and choice (vLLM chat_completion/serving.py `chat_completion_stream_generator` yields one
 * chunk per choice output, each `model_dump_json(exclude_unset=True)`). The per-request prefix
 * (id, object, created, model) is built once; a word's chunk is prefix + pre-escaped word + suffix,
 * so no JSON.stringify runs per plain token.
 *
 * chat:       {"id","object":"chat.completion.chunk","created","model","choices":[{"index":i,"delta":D,"logprobs":L,"finish_reason":F}]}
 *             D = {"content":W} | {"reasoning":W} (reasoning words) | tool call deltas: first
 *             {"tool_calls":[{"index":0,"id","type":"function","function":{"name"}}]}, then
 *             {"tool_calls":[{"index":0,"function":{"arguments":piece}}]} (the tool parsers' streaming shape)
 * completion: {"id","object":"text_completion","created","model","choices":[{"index":i,"text":W,"logprobs":L,"finish_reason":null,"stop_reason":null}]}
 * The last chunk of a choice carries finish_reason and stop_reason; with return_token_ids each
 * choice has `token_ids:[..]` and the first chunk has top-level `prompt_token_ids`.
 */
export class ChunkWriter {
  private readonly head: string;
  private readonly chat: boolean;
  /** Completions logprobs: text length so far per choice (`text_offset` continues across chunks). */
  private readonly offsets: number[] = [];

  constructor(
    kind: 'chat' | 'completion',
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly withTokenIds: boolean,
    private readonly style: ChatStyle = { reasoningKeys: ['reasoning'] },
    /** chat top_logprobs / completions logprobs; null: no logprobs. */
    private readonly logprobs: number | null = null,
    /** Completions `echo`: the prompt text. */
    private readonly echo: string | null = null,
  ) {
    this.chat = kind === 'chat';
    const object = this.chat ? 'chat.completion.chunk' : 'text_completion';
    this.head = `data: {"id":${JSON.stringify(id)},"object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":[{"index":`;
  }

  /**
   * Chat: the role chunk of choice `index` (always first). Completion: '' (its first token chunk is
   * first), or an empty chunk carrying `prompt_token_ids`; `echo` (completions): the prompt text.
   */
  first(promptIds: readonly number[] | null, index = 0): string {
    const pti = promptIds ? `,"prompt_token_ids":[${promptIds.join(',')}]` : '';
    if (!this.chat) {
      if (!pti) return '';
      return `${this.head}${index},"text":"","logprobs":null,"finish_reason":null,"stop_reason":null}]${pti}}\n\n`;
    }
    return `${this.head}${index},"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${pti}}\n\n`;
  }

  /** The chunk of step `i` of choice `c`; `end` on its last step. */
  step(c: ChoiceOutput, i: number, end: Ending | null): string {
    const fin = end === null ? 'null' : endJson(end);
    const tid = this.withTokenIds ? `,"token_ids":[${stepIds(c, i)}]` : '';
    const nw = c.words.length;
    const word = i < nw ? OUTPUT_VOCAB.json[c.words[i]!]! : null;
    if (this.chat) {
      const lp =
        this.logprobs === null
          ? 'null'
          : `{"content":[${chatLogprobEntry(c.seed, i, stepText(c, i), this.logprobs)}]}`;
      return `${this.head}${c.index},"delta":${this.chatDelta(c, i, word)},"logprobs":${lp},"finish_reason":${fin}${tid}}]}\n\n`;
    }
    let text = word ?? JSON.stringify(stepText(c, i));
    // echo: vLLM prepends the prompt to a choice's first delta (completion/serving.py
    // completion_stream_generator); its text_offset counts from the prompt's end
    if (i === 0 && this.echo !== null) {
      text = JSON.stringify(this.echo + stepText(c, 0));
      this.offsets[c.index] = this.echo.length;
    }
    let lp = 'null';
    if (this.logprobs !== null) {
      const t = stepText(c, i);
      const at = this.offsets[c.index] ?? 0;
      lp = completionLogprobs(c.seed, i, [t], this.logprobs, at);
      this.offsets[c.index] = at + t.length;
    }
    return `${this.head}${c.index},"text":${text},"logprobs":${lp},"finish_reason":${fin}${end === null ? ',"stop_reason":null' : ''}${tid}}]}\n\n`;
  }

  private chatDelta(c: ChoiceOutput, i: number, word: string | null): string {
    if (word !== null) {
      if (i >= c.reasoning) return `{"content":${word}}`;
      return `{${this.style.reasoningKeys.map((k) => `"${k}":${word}`).join(',')}}`;
    }
    const j = i - c.words.length;
    if (c.tool === null) return `{"content":${JSON.stringify(c.json!.pieces[j]!)}}`;
    if (j === 0) {
      return `{"tool_calls":[{"index":0,"id":${JSON.stringify(c.tool.id)},"type":"function","function":{"name":${JSON.stringify(c.tool.name)}}}]}`;
    }
    return `{"tool_calls":[{"index":0,"function":{"arguments":${JSON.stringify(c.tool.args.pieces[j - 1]!)}}}]}`;
  }

  /** A finish chunk without a token (output ended before any token, or vllm-ascend's recompute frame). */
  finishOnly(end: Ending, index = 0): string {
    const tid = this.withTokenIds ? ',"token_ids":[]' : '';
    if (this.chat) {
      return `${this.head}${index},"delta":{"content":""},"logprobs":null,"finish_reason":${endJson(end)}${tid}}]}\n\n`;
    }
    return `${this.head}${index},"text":"","logprobs":null,"finish_reason":${endJson(end)}${tid}}]}\n\n`;
  }

  usage(u: Usage): string {
    const object = this.chat ? 'chat.completion.chunk' : 'text_completion';
    return `data: ${JSON.stringify({ id: this.id, object, created: this.created, model: this.model, choices: [], usage: u })}\n\n`;
  }
}
