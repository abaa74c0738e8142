import { describe, expect, it } from 'vitest';
import { Scheduler } from './scheduler.js';
import { instance, request } from './testing.js';
import type { SchedulableInstance } from './types.js';

const SYNC = ['concurrent_engine_sync'];
const of = (id: string, role: 'prefill' | 'decode', engine?: string): SchedulableInstance => ({
  ...instance(id, role, SYNC),
  ...(engine ? { engine } : {}),
});

// A vLLM layer-wise prefill and an SGLang decode share the plan name `concurrent_engine_sync`, but not
// a wire flow: such a pair could only fail.
describe('pairs form within one engine kind', () => {
  it.each([
    {
      name: 'vLLM prefill → the vLLM decode',
      instances: [of('pv', 'prefill', 'vllm'), of('ds', 'decode', 'sglang'), of('dv', 'decode', 'vllm')],
      prefill: 'pv',
      decode: 'dv',
    },
    {
      name: 'SGLang prefill → the SGLang decode',
      instances: [of('ps', 'prefill', 'sglang'), of('dv', 'decode', 'vllm'), of('ds', 'decode', 'sglang')],
      prefill: 'ps',
      decode: 'ds',
    },
    {
      name: 'a prefill with no decode of its kind is passed over',
      instances: [of('pv', 'prefill', 'vllm'), of('ps', 'prefill', 'sglang'), of('ds', 'decode', 'sglang')],
      prefill: 'ps',
      decode: 'ds',
    },
    {
      name: 'an instance naming no engine pairs with any',
      instances: [of('p', 'prefill'), of('ds', 'decode', 'sglang')],
      prefill: 'p',
      decode: 'ds',
    },
  ])('$name', ({ instances, prefill, decode }) => {
    for (let seed = 1; seed <= 20; seed += 1) {
      const decision = new Scheduler({ seed }).selectPair(request(), instances);
      expect(decision).toMatchObject({ kind: 'pair', prefill: { id: prefill }, decode: { id: decode } });
    }
  });
});
