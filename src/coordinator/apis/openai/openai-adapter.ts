import type { ServerResponse } from 'node:http';
import { bearerToken } from '../../../common/http.js';
import { renderError } from '../../../common/http-error.js';
import { OpenAiPassThroughSink, type ClientSink } from '../../dispatch/pipeline.js';
import type { ApiKind, ClientRequest } from '../../internal-request/client-request.js';
import type { ApiAdapter, Translated } from '../api-adapter.js';
import { validateClientRequest } from './request-validation.js';

/** A request the engines serve as it came: its own body, its bytes spliced into the legs. */
class PassThrough implements Translated {
  constructor(
    readonly request: ClientRequest,
    private readonly rootRequestId: string,
  ) {}

  createSink(res: ServerResponse): ClientSink {
    return new OpenAiPassThroughSink(res, this.rootRequestId, this.request.stream);
  }
}

/**
 * An OpenAI API the engines serve themselves: the body is validated and runs untouched (no
 * re-serialising), the answer passes through as the engine's bytes, errors are OpenAI error objects,
 * and the key is `Authorization: Bearer`.
 */
function openAiPassThroughAdapter(api: string, kind: ApiKind, path: string): ApiAdapter {
  return {
    kind: 'generation',
    api,
    path,
    apiKey: bearerToken,
    toInternal(body, { source, rootRequestId }) {
      const request = validateClientRequest(kind, body);
      request.source = source;
      return new PassThrough(request, rootRequestId);
    },
    renderError,
  };
}

/** OpenAI Chat Completions (openai-node src/resources/chat/completions). */
export const openAiChatAdapter = openAiPassThroughAdapter('openai-chat', 'chat', '/v1/chat/completions');

/** OpenAI (legacy) Completions (openai-node src/resources/completions.ts). */
export const openAiCompletionsAdapter = openAiPassThroughAdapter(
  'openai-completions',
  'completion',
  '/v1/completions',
);
