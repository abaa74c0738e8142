import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedPromptError, type ChatInput } from './chat-template.js';
import { ModelTokenizer } from './model-tokenizer.js';
import { QWEN3_CHAT_FIXTURE, QWEN3_DIR } from './testing/index.js';

interface Case {
  name: string;
  messages?: ChatInput['messages'];
  tools?: ChatInput['tools'];
  addGenerationPrompt?: boolean;
  chatTemplateKwargs?: Record<string, unknown>;
  prompt?: string;
  text?: string;
  tokenIds: number[];
}

const { cases } = JSON.parse(readFileSync(QWEN3_CHAT_FIXTURE, 'utf8')) as { cases: Case[] };

let tok: ModelTokenizer;
beforeAll(async () => {
  tok = await ModelTokenizer.load(QWEN3_DIR);
});

describe('ModelTokenizer (Qwen3, golden from HF tokenizers + jinja2)', () => {
  it.each(cases)('$name', (c) => {
    if (c.prompt !== undefined) {
      expect(tok.promptTokenIds(c.prompt)).toEqual(c.tokenIds);
      return;
    }
    const input: ChatInput = {
      messages: c.messages!,
      tools: c.tools,
      addGenerationPrompt: c.addGenerationPrompt,
      chatTemplateKwargs: c.chatTemplateKwargs,
    };
    expect(tok.renderChat(input)).toBe(c.text);
    expect(tok.chatTokenIds(input)).toEqual(c.tokenIds);
  });

  it('refuses what it cannot tokenise as vLLM would, in one line', () => {
    const image = { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] };
    expect(() => tok.chatTokenIds(image)).toThrow(UnsupportedPromptError);
    expect(() => tok.chatTokenIds(image)).toThrow(/content part of type 'image_url'/);
  });

  it('a missing tokenizer.json is one clear error', async () => {
    await expect(ModelTokenizer.load('/nonexistent-dir')).rejects.toThrow(
      /no tokenizer\.json in \/nonexistent-dir/,
    );
  });
});
