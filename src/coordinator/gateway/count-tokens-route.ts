import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyReader } from '../../common/body-reader.js';
import { sendJson } from '../../common/http.js';
import { MotorError } from '../../common/motor-error.js';
import {
  anthropicApiKey,
  anthropicVersionError,
  COUNT_TOKENS_PATH,
} from '../apis/anthropic-messages/adapter.js';
import { countTokensToChat } from '../apis/anthropic-messages/request.js';
import { unauthorizedError, BEARER_CHALLENGE, type ApiKeys } from './api-keys.js';
import type { Refuse } from './api-route.js';
import type { GatewayDeps } from './gateway.js';
import { bodyRefusal, readJsonBody } from './json-body.js';
import { validateClientRequest } from '../apis/openai/request-validation.js';

/**
 * `POST /v1/messages/count_tokens` (Anthropic `MessageCountTokensParams` → `{input_tokens}`): the
 * prompt is translated as for `/v1/messages` and counted with the model's tokenizer or an engine's
 * tokenize route (prompt-token-count.ts). Nothing is generated, so it takes no admission slot.
 */
export function countTokensRoute(
  deps: Pick<GatewayDeps, 'countTokens'>,
  apiKeys: ApiKeys,
  bodies: BodyReader,
  refuse: Refuse,
) {
  const path = COUNT_TOKENS_PATH;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!apiKeys.allows(anthropicApiKey(req)))
      return refuse(res, path, unauthorizedError(), BEARER_CHALLENGE);
    const bad = anthropicVersionError(req);
    if (bad) return refuse(res, path, bad);
    const oversize = bodies.declaredTooLarge(req);
    if (oversize !== null) {
      const { error, headers } = bodyRefusal(oversize);
      return refuse(res, path, error, headers);
    }
    const body = await readJsonBody(bodies, req);
    if ('error' in body) return refuse(res, path, body.error, body.headers);
    try {
      const client = validateClientRequest('chat', countTokensToChat(body.value));
      if (!deps.countTokens)
        throw new MotorError('no_route', 'this coordinator cannot count tokens (no tokenizer, no engine)');
      const { tokens } = await deps.countTokens(client);
      sendJson(res, 200, { input_tokens: tokens });
    } catch (err) {
      if (err instanceof MotorError) return refuse(res, path, err);
      throw err;
    }
  };
}
