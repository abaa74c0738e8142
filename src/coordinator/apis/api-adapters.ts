import type { ApiAdapter } from './api-adapter.js';
import { anthropicMessagesAdapter } from './anthropic-messages/adapter.js';
import { openAiChatAdapter, openAiCompletionsAdapter } from './openai/openai-adapter.js';
import { openAiResponsesAdapter, type ResponsesDeps } from './openai-responses/adapter.js';

/** What the adapters need from the coordinator's wiring. */
export interface ApiAdapterDeps {
  /** The Responses API's store (`store: null`: only `store: false` requests are served). */
  readonly responses: ResponsesDeps;
}

/** The client APIs the gateway serves, one adapter each: a new API adds its adapter here. */
export function apiAdapters(deps: ApiAdapterDeps): readonly ApiAdapter[] {
  return [
    openAiChatAdapter,
    openAiCompletionsAdapter,
    anthropicMessagesAdapter,
    openAiResponsesAdapter(deps.responses),
  ];
}
