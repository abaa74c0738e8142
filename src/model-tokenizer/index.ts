export { UnsupportedPromptError, type ChatInput } from './chat-template.js';
export { ModelTokenizer } from './model-tokenizer.js';
export { TokenizerClient, type TokenizedPrompt, type TokenizerClientOptions } from './tokenizer-client.js';
export type { TokenizeInput } from './tokenizer-protocol.js';
export { tokenizeInputOf } from './tokenize-input.js';
