import type { ServerResponse } from 'node:http';
import { bearerToken } from '../../../common/http.js';
import { renderError } from '../../../common/http-error.js';
import { MotorError } from '../../../common/motor-error.js';
import type { ResponseStore, StoredResponse } from '../../../state/response-store/response-store.js';
import type { ClientSink } from '../../dispatch/pipeline.js';
import type { ClientRequest } from '../../internal-request/client-request.js';
import type { AdapterContext, ApiAdapter, Translated } from '../api-adapter.js';
import { validateClientRequest } from '../openai/request-validation.js';
import type { ChatChunk } from '../chat-frames.js';
import { TranslatingSink } from '../translating-sink.js';
import { previousItems, resolveReferences } from './conversation.js';
import { itemsToMessages, parseResponsesRequest, type Item, type ParsedResponsesRequest } from './request.js';
import {
  chatToOutput,
  responseObject,
  responsesUsage,
  ResponseIds,
  storedInputItem,
} from './response-object.js';
import { ResponsesStreamEncoder } from './stream-events.js';

export const RESPONSES_PATH = '/v1/responses';

export interface ResponsesDeps {
  /** null: no store configured (`store: true` then needs one: refused). */
  readonly store: ResponseStore | null;
  readonly maxChainDepth: number;
}

/** What the answer's sink needs of the request it was translated from. */
interface ResponsesTurn {
  readonly parsed: ParsedResponsesRequest;
  readonly tenant: string;
  /** This turn's input with references resolved (what is stored and listed). */
  readonly input: readonly Item[];
  readonly rootRequestId: string;
}

const unavailable = (): MotorError =>
  new MotorError(
    'store_unavailable',
    'the response store is unavailable: store: true and previous_response_id cannot be served now (store: false can)',
  );

/** OpenAI Responses (`POST /v1/responses`) on the chat pipeline, with the coordinator's response store. */
export function openAiResponsesAdapter(deps: ResponsesDeps): ApiAdapter {
  return {
    kind: 'generation',
    api: 'openai-responses',
    path: RESPONSES_PATH,
    apiKey: bearerToken,
    async toInternal(body: unknown, ctx: AdapterContext): Promise<Translated> {
      const parsed = parseResponsesRequest(body);
      const { store } = deps;
      const needsStore = parsed.store || parsed.previousResponseId !== null;
      if (needsStore && (store === null || !store.available())) throw unavailable();
      const tenant = ctx.tenant();
      const history =
        parsed.previousResponseId !== null
          ? await previousItems(store!, tenant, parsed.previousResponseId, deps.maxChainDepth)
          : [];
      const input = await resolveReferences(store, tenant, parsed.input);
      const chat: Record<string, unknown> = {
        model: parsed.model,
        messages: itemsToMessages([...history, ...input], parsed.instructions),
        ...parsed.chatFields,
      };
      if (parsed.stream) {
        chat.stream = true;
        chat.stream_options = { include_usage: true }; // the final response carries usage
      }
      const request = validateClientRequest('chat', chat);
      const turn: ResponsesTurn = { parsed, tenant, input, rootRequestId: ctx.rootRequestId };
      return { request, createSink: (res) => responsesSink(res, request, turn, deps) };
    },
    renderError: (res, err, headers) => renderError(res, err, headers),
  };
}

/** The pipeline's chat answer as a Responses answer (stream events or the response object), stored. */
function responsesSink(
  res: ServerResponse,
  client: ClientRequest,
  t: ResponsesTurn,
  deps: ResponsesDeps,
): ClientSink {
  const ids = new ResponseIds(t.rootRequestId);
  const shell = {
    ids,
    model: client.model,
    createdAt: Math.floor(Date.now() / 1000),
    echo: t.parsed.echo,
  };
  const save = async (response: Record<string, unknown>): Promise<void> => {
    if (!t.parsed.store) return;
    const record: StoredResponse = {
      id: ids.response,
      tenant: t.tenant,
      previousId: t.parsed.previousResponseId,
      input: t.input.map((item, i) => storedInputItem(item, `${ids.message()}_in${i}`)),
      response,
    };
    await deps.store!.put(record);
  };
  const encoder = new ResponsesStreamEncoder(shell);
  return new TranslatingSink(res, t.rootRequestId, client.stream, {
    start: () => encoder.start(),
    chunk: (c) => encoder.chunk(c),
    async end() {
      const closing = encoder.finishItems();
      const response = encoder.finalResponse();
      try {
        await save(response);
      } catch (err) {
        const e = err instanceof MotorError ? err : unavailable();
        return closing + encoder.failedEvent(e.code, e.message);
      }
      return closing + encoder.completedEvent(response);
    },
    streamError: (err) => encoder.failedEvent(err.code, err.message),
    async json(chat: ChatChunk) {
      const { output, status } = chatToOutput(chat, ids);
      const response = responseObject(shell, status, output, responsesUsage(chat.usage));
      await save(response);
      return response;
    },
    renderError: (r, err) => renderError(r, err),
  });
}
