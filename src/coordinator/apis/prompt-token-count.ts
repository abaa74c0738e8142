import { MotorError } from '../../common/motor-error.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import type { Instance, InstanceSource } from '../fleet/instance-source.js';
import type { PromptBlockKeys } from '../kv-routing/prompt-block-keys.js';
import { servesModel } from '../scheduling-bridge/route.js';
import type { Upstreams } from '../fleet/upstream.js';

/** A chat request's prompt length in the model's tokens, and how it was counted. */
export interface PromptTokenCount {
  readonly tokens: number;
  readonly via: 'model-tokenizer' | 'engine-tokenize';
}

export type PromptTokenCounter = (client: ClientRequest) => Promise<PromptTokenCount>;

export interface PromptTokenCounterDeps {
  source: Pick<InstanceSource, 'routable'>;
  upstreams: Pick<Upstreams, 'request'>;
  /** The model's own tokenizer and chat template (`kvHash` groups); null when none is configured. */
  keys: () => PromptBlockKeys | null;
  timeoutMs: number;
}

/**
 * Counts a chat prompt as the engine will see it: the model's own tokenizer and chat template when a
 * `kvHash` group covers the model, else one engine's tokenize route. vLLM's `POST /tokenize` takes the
 * chat form and renders the server's chat template (vllm-project/vllm
 * vllm/entrypoints/serve/tokenize/api_router.py `tokenize`; serving_tokenization.py `create_tokenize`
 * in 0.6–0.11) and answers `{count, tokens, …}`. SGLang's `/v1/tokenize` has no chat form
 * (python/sglang/srt/entrypoints/openai/serving_tokenize.py), so an SGLang-only fleet without a
 * configured tokenizer gets a clear error.
 */
export function promptTokenCounter(deps: PromptTokenCounterDeps): PromptTokenCounter {
  return async (client) => {
    const keys = deps.keys();
    if (keys !== null) {
      const prompts = await keys.prompts(client);
      for (const p of prompts.values()) return { tokens: p.promptTokens, via: 'model-tokenizer' };
    }
    const instance = deps.source
      .routable()
      .find((i: Instance) => i.engine !== 'sglang' && servesModel(i, client.model));
    if (instance === undefined)
      throw new MotorError(
        'no_route',
        `cannot count tokens for '${client.model}': no kvHash tokenizer is configured for it and no vLLM instance serves it (SGLang has no chat tokenize route)`,
      );
    const { model, messages, tools } = client.body;
    const res = await deps.upstreams.request(instance, {
      method: 'POST',
      path: '/tokenize',
      body: JSON.stringify({ model, messages, ...(tools !== undefined ? { tools } : {}) }),
      signal: AbortSignal.timeout(Math.max(1, deps.timeoutMs)),
    });
    const text = await res.body.text();
    let count: unknown;
    try {
      count = (JSON.parse(text) as { count?: unknown }).count;
    } catch {
      count = undefined;
    }
    if (res.statusCode !== 200 || typeof count !== 'number')
      throw new MotorError(
        'engine_error',
        `instance ${instance.id} could not tokenize the prompt (POST /tokenize answered ${res.statusCode})`,
        { retryable: false },
      );
    return { tokens: count, via: 'engine-tokenize' };
  };
}
