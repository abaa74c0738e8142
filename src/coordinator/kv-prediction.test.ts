import { describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { BlockIndex } from '../kv-events/block-index.js';
import type { KvEventsHub } from '../kv-events/kv-events-hub.js';
import type { KvSubscriberStatus } from '../kv-events/kv-event-subscriber.js';
import type { ClientRequest } from './client-request.js';
import { KvPredictor } from './kv-prediction.js';
import type { GroupPrompt, PromptBlockKeys } from './prompt-block-keys.js';

const log = createLogger('kv-prediction-test', 'silent');
const client = { kind: 'chat', model: 'm', body: {} } as unknown as ClientRequest;
const status = (instance: string, over: Partial<KvSubscriberStatus> = {}): KvSubscriberStatus => ({
  instance,
  lastSeq: 3n,
  lastBatchAtMs: 0,
  lagMs: 0,
  batches: 4,
  gaps: 0,
  resyncs: 0,
  error: null,
  ...over,
});

function predictor(prompts: () => Promise<Map<string, GroupPrompt>>, statuses: KvSubscriberStatus[]) {
  const index = new BlockIndex();
  index.store('held', [1n, 2n, 3n]);
  index.store('down', [1n, 2n, 3n]);
  const keys = {
    prompts,
    groupOf: (id: string) => (id === 'other' ? 'g2' : 'g'),
  } as unknown as PromptBlockKeys;
  const hub = { index, status: () => statuses } as unknown as KvEventsHub;
  return new KvPredictor(keys, hub, log);
}

const prompt: GroupPrompt = { promptTokens: 50, blockKeys: BigUint64Array.from([1n, 2n, 3n]), blockSize: 16 };

describe('KvPredictor', () => {
  it.each([
    ['held blocks, last token never cached', status('held'), 48],
    ['an instance holding nothing: 0', status('cold'), 0],
    ['a failed stream: unknown', status('down', { error: 'boom' }), undefined],
    ['no batch yet: unknown', status('held', { lastSeq: null }), undefined],
    ['another group: unknown', status('other'), undefined],
  ])('%s', async (_name, st, want) => {
    const p = await predictor(async () => new Map([['g', prompt]]), [st]).predict(client);
    expect(p?.promptTokens).toBe(50);
    expect(p?.cachedTokens.get(st.instance)).toBe(want);
  });

  it('no keys, or a tokenizer failure: no prediction (approximate routing)', async () => {
    expect(await predictor(async () => new Map(), [status('held')]).predict(client)).toBeUndefined();
    const failing = predictor(() => Promise.reject(new Error('worker gone')), [status('held')]);
    expect(await failing.predict(client)).toBeUndefined();
  });
});
