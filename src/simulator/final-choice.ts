import { decode } from 'gpt-tokenizer/encoding/cl100k_base';
import { choiceSteps, type ChoiceOutput } from './answer.js';
import type { ChatStyle } from './chunk-writer.js';
import { stepText } from './chunk-writer.js';
import { chatLogprobEntry, completionLogprobs } from './logprobs.js';
import type { GenRequest } from './request-body.js';
import { OUTPUT_VOCAB, outputText } from './tokens.js';

/**
 * The prompt as `echo` repeats it: its text, or for a token-id prompt the text the ids decode to
 * (vLLM completion/serving.py prepends the prompt text to the choice's text).
 */
export function echoText(g: GenRequest): string {
  if (g.promptText !== null) return g.promptText;
  try {
    return decode(g.promptIds);
  } catch {
    return '';
  }
}

/** Every output token id of a choice, in order. */
export function choiceTokenIds(c: ChoiceOutput): number[] {
  const ids = Array.from(c.words, (w) => OUTPUT_VOCAB.ids[w]!);
  if (c.tool !== null) ids.push(...c.tool.nameIds, ...c.tool.args.ids.flat());
  else if (c.json !== null) ids.push(...c.json.ids.flat());
  return ids;
}

/** The step texts of a choice (what its logprobs entries name). */
function stepTexts(c: ChoiceOutput): string[] {
  const out: string[] = [];
  for (let i = 0, n = choiceSteps(c); i < n; i++) out.push(stepText(c, i));
  return out;
}

/**
 * A non-streaming choice as vLLM's server returns it (chat_completion/serving.py
 * `chat_completion_full_generator`, completion/serving.py `request_output_to_completion_response`,
 * main 2026): chat `message` with the content, the reasoning under the profile's key(s), and a tool
 * call as `tool_calls:[{id, type:"function", function:{name, arguments}}]` (SGLang adds the call's
 * `index`: protocol.py ToolCall); `logprobs`, `finish_reason`, `stop_reason`, and with
 * return_token_ids `token_ids`.
 */
export function finalChoice(
  g: GenRequest,
  c: ChoiceOutput,
  opts: { style: ChatStyle; sglang: boolean },
): Record<string, unknown> {
  const contentWords = c.words.subarray(c.reasoning);
  let choice: Record<string, unknown>;
  if (g.kind === 'chat') {
    const message: Record<string, unknown> = { role: 'assistant' };
    if (c.tool !== null) message.content = c.tool.content;
    else if (c.json !== null) message.content = c.json.text;
    else message.content = outputText(contentWords);
    if (c.reasoning > 0) {
      const reasoning = outputText(c.words.subarray(0, c.reasoning));
      for (const key of opts.style.reasoningKeys) message[key] = reasoning;
    }
    if (c.tool !== null) {
      const fn = { name: c.tool.name, arguments: c.tool.args.text };
      message.tool_calls = [
        opts.sglang
          ? { id: c.tool.id, index: 0, type: 'function', function: fn }
          : { id: c.tool.id, type: 'function', function: fn },
      ];
    }
    const logprobs =
      g.logprobs === null
        ? null
        : JSON.parse(
            `{"content":[${stepTexts(c)
              .map((t, i) => chatLogprobEntry(c.seed, i, t, g.logprobs!))
              .join(',')}]}`,
          );
    choice = {
      index: c.index,
      message,
      logprobs,
      finish_reason: c.end.finish,
      stop_reason: c.end.stopReason,
    };
  } else {
    const out = c.json !== null ? c.json.text : outputText(contentWords);
    const text = g.echo ? echoText(g) + out : out;
    const logprobs =
      g.logprobs === null
        ? null
        : JSON.parse(
            completionLogprobs(c.seed, 0, stepTexts(c), g.logprobs, g.echo ? echoText(g).length : 0),
          );
    choice = { index: c.index, text, logprobs, finish_reason: c.end.finish, stop_reason: c.end.stopReason };
  }
  if (g.returnTokenIds) {
    choice.token_ids = choiceTokenIds(c);
    if (g.kind === 'completion') choice.prompt_token_ids = g.promptIds;
  }
  return choice;
}
