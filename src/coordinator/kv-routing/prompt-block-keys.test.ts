import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { BlockHasher, eventBlockHash } from '../../kv-hash/index.js';
import { QWEN3_CHAT_FIXTURE, QWEN3_DIR } from '../../model-tokenizer/testing/index.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import { PromptBlockKeys, tokenizeInput } from './prompt-block-keys.js';

const golden = (
  JSON.parse(readFileSync(QWEN3_CHAT_FIXTURE, 'utf8')) as { cases: Array<Record<string, unknown>> }
).cases;
const tools = golden.find((c) => c.tools)!;
const BLOCK_HASH = { algo: 'sha256_cbor', blockSize: 16, seed: '0' } as const;
const keysOf = (ids: readonly number[], cacheSalt?: string) =>
  BigUint64Array.from(new BlockHasher(BLOCK_HASH).hashes(ids, { cacheSalt }).map(eventBlockHash));

const chat = (body: Record<string, unknown>, model = 'qwen3'): ClientRequest => ({
  kind: 'chat',
  body: { model, ...body },
  model,
  stream: false,
  wantsTokenIds: false,
});

const log = { error: vi.fn() };
let keys: PromptBlockKeys;
beforeAll(async () => {
  const { kvHash } = validateCoordinatorConfig({
    kvHash: {
      groups: [
        {
          name: 'q',
          models: ['qwen3'],
          instances: ['p0', 'd0'],
          tokenizer: { path: QWEN3_DIR },
          blockHash: BLOCK_HASH,
        },
        { name: 'broken', models: ['qwen3'], tokenizer: { path: '/nonexistent' }, blockHash: BLOCK_HASH },
      ],
    },
  });
  keys = await PromptBlockKeys.start(kvHash.groups, log as unknown as Logger);
});
afterAll(async () => {
  await keys.close();
});

describe('PromptBlockKeys', () => {
  it('a group whose tokenizer does not load is logged once and left out', () => {
    expect(log.error).toHaveBeenCalledTimes(1);
    expect(log.error.mock.calls[0]![0]).toMatchObject({ group: 'broken' });
    expect(keys.groupOf('x', 'qwen3')).toBeUndefined();
  });

  it('a chat request: the keys the engine would publish, salted as the engine will be', async () => {
    const body = { messages: tools.messages, tools: tools.tools };
    const plain = await keys.of(chat(body));
    expect([...plain.keys()]).toEqual(['q']);
    expect(plain.get('q')).toEqual(keysOf(tools.tokenIds as number[]));
    const salted = await keys.of(chat({ ...body, cache_salt: 'tenant-a' }));
    expect(salted.get('q')).toEqual(keysOf(tools.tokenIds as number[], 'tenant-a'));
    expect(salted.get('q')![0]).not.toBe(plain.get('q')![0]);
  });

  it('completions token ids are hashed as they are', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => i * 1000);
    const req: ClientRequest = { ...chat({}), kind: 'completion', body: { model: 'qwen3', prompt: ids } };
    expect((await keys.of(req)).get('q')).toEqual(keysOf(ids));
  });

  it('no keys for another model or a request Motor cannot reproduce', async () => {
    expect((await keys.of(chat({ messages: tools.messages }, 'other'))).size).toBe(0);
    expect((await keys.of(chat({ messages: tools.messages, chat_template: '{{x}}' }))).size).toBe(0);
    const image = { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] };
    expect((await keys.of(chat(image))).size).toBe(0);
  });

  it('groupOf: listed instances only', () => {
    expect(keys.groupOf('p0', 'qwen3')).toBe('q');
    expect(keys.groupOf('p9', 'qwen3')).toBeUndefined();
    expect(keys.groupOf('p0', 'other')).toBeUndefined();
  });
});

describe('tokenizeInput', () => {
  const completion = (prompt: unknown): ClientRequest => ({
    ...chat({}),
    kind: 'completion',
    body: { prompt },
  });
  it.each([
    [completion('hi'), { kind: 'prompt', prompt: 'hi' }],
    [completion([1, 2]), { kind: 'tokens', tokenIds: [1, 2] }],
    [completion(['a', 'b']), null],
    [chat({ messages: [], continue_final_message: true }), null],
    [chat({ messages: [], continue_final_message: false, add_generation_prompt: false }), { kind: 'chat' }],
  ])('%j → %j', (req, want) => {
    const got = tokenizeInput(req);
    if (want === null) expect(got).toBeNull();
    else expect(got).toMatchObject(want);
  });
});
