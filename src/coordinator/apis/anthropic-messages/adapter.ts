import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken } from '../../../common/http.js';
import { MotorError } from '../../../common/motor-error.js';
import type { ClientSink } from '../../dispatch/pipeline.js';
import type { ChatChunk } from '../chat-frames.js';
import type { ApiAdapter, Translated } from '../api-adapter.js';
import { TranslatingSink } from '../translating-sink.js';
import { anthropicStreamError, renderAnthropicError } from './errors.js';
import { chatToMessage, messageIdFor, type StopInfo } from './message.js';
import { messagesToChat } from './request.js';
import { validateClientRequest } from '../openai/request-validation.js';
import { AnthropicStreamEncoder } from './stream-events.js';

export const MESSAGES_PATH = '/v1/messages';
export const COUNT_TOKENS_PATH = '/v1/messages/count_tokens';

/**
 * The Anthropic key: `x-api-key` (what `@anthropic-ai/sdk` sends, client.ts `apiKeyAuth`) or
 * `Authorization: Bearer` (its `authToken`); the same `server.apiKeys` as the OpenAI routes.
 */
export function anthropicApiKey(req: IncomingMessage): string {
  const key = req.headers['x-api-key'];
  if (typeof key === 'string' && key.trim() !== '') return key.trim();
  return bearerToken(req);
}

/**
 * `anthropic-version` names the API revision as a date (`2023-06-01`, the one revision the Messages API
 * has had; the SDK always sends it). Missing is accepted (curl users); a malformed value is refused.
 */
export function anthropicVersionError(req: IncomingMessage): MotorError | null {
  const v = req.headers['anthropic-version'];
  if (v === undefined) return null;
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v.trim())) return null;
  return new MotorError('invalid_request', 'anthropic-version: must be a date such as 2023-06-01', {
    param: 'anthropic-version',
  });
}

export const anthropicMessagesAdapter: ApiAdapter = {
  kind: 'generation',
  api: 'anthropic-messages',
  path: MESSAGES_PATH,
  apiKey: anthropicApiKey,
  headerError: anthropicVersionError,
  toInternal(body, { rootRequestId }): Translated {
    const t = messagesToChat(body);
    const request = validateClientRequest('chat', t.chat);
    const stop: StopInfo = { stopSequences: t.stopSequences };
    return {
      request,
      createSink(res: ServerResponse): ClientSink {
        const id = messageIdFor(rootRequestId);
        const model = request.model;
        const encoder = new AnthropicStreamEncoder(id, model, stop);
        return new TranslatingSink(res, rootRequestId, request.stream, {
          start: () => encoder.start(),
          chunk: (c) => encoder.chunk(c),
          end: () => encoder.end(),
          streamError: anthropicStreamError,
          json: (chat: ChatChunk) => chatToMessage(chat, id, model, stop),
          renderError: (r, err) => renderAnthropicError(r, err),
        });
      },
    };
  },
  renderError: renderAnthropicError,
};
