import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness } from '../testing/dispatch-harness.js';

/**
 * The layer-wise connector makes one metaserver call per prompt of a completions list; Motor runs one
 * prefill per request, so the coordinator refuses a list up front (vllm.ts `triggerPromptListError`)
 * rather than leave the other prompts' decodes waiting for KV.
 */

let h: DispatchHarness | null = null;
afterEach(async () => {
  await h?.close();
  h = null;
});

describe('trigger flow, completions prompt list', () => {
  it.each(['direct', 'proxy'])('%s mode: 400 naming prompt, no retry', async (mode) => {
    const inst = (id: string, role: string) => ({
      id,
      url: `http://${id}.test:1`,
      role,
      dispatchProfile: 'trigger',
      ...(mode === 'direct' ? { mode } : {}),
    });
    h = new DispatchHarness(
      { instances: [inst('P', 'prefill'), inst('D', 'decode')] },
      {
        P: () => ({ kind: 'hang' }),
        D: () => ({ kind: 'hang' }),
      },
    );
    const reply = await h.send({ prompt: ['a', 'b'] });
    expect(reply?.status).toBe(400);
    expect(JSON.parse(reply!.text).error).toMatchObject({ param: 'prompt', type: 'invalid_request_error' });
    expect(h.calls).toEqual([]);
  });
});
