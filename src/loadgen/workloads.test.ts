import { describe, expect, it } from 'vitest';
import { WORKLOAD_NAMES, createWorkload } from './workloads.js';

const words = (s: string): number => s.split(' ').length;

describe('workloads', () => {
  it.each(WORKLOAD_NAMES)('%s is deterministic from the seed and differs across seeds', (name) => {
    const a = createWorkload(name, { seed: 7 });
    const b = createWorkload(name, { seed: 7 });
    const c = createWorkload(name, { seed: 8 });
    // Order of generation does not matter: request i is a pure function of (seed, stream, i).
    const forward = [0, 1, 2, 3, 40].map((i) => a.request(i));
    const backward = [40, 3, 2, 1, 0].map((i) => b.request(i)).reverse();
    expect(forward).toEqual(backward);
    expect(JSON.stringify(c.request(0))).not.toBe(JSON.stringify(a.request(0)));
    // The warm-up stream is different from the measured one.
    expect(JSON.stringify(a.request(5, 1))).not.toBe(JSON.stringify(a.request(5, 0)));
  });

  it('short-chat: short prompts and the default output length', () => {
    const w = createWorkload('short-chat', { seed: 1 });
    for (let i = 0; i < 50; i++) {
      const r = w.request(i);
      expect(r.messages).toHaveLength(1);
      expect(words(r.messages[0]!.content)).toBeLessThan(80);
      expect(r.maxTokens).toBe(64);
    }
    expect(createWorkload('short-chat', { seed: 1, maxTokens: 5 }).request(0).maxTokens).toBe(5);
  });

  it('long-prompt: thousands of tokens, short output, distinct from the first words', () => {
    const w = createWorkload('long-prompt', { seed: 1 });
    const starts = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const r = w.request(i);
      const n = words(r.messages[0]!.content);
      expect(n).toBeGreaterThanOrEqual(1500);
      expect(n).toBeLessThanOrEqual(4600);
      expect(r.maxTokens).toBe(16);
      starts.add(r.messages[0]!.content.split(' ').slice(0, 8).join(' '));
    }
    expect(starts.size).toBe(20);
    const custom = createWorkload('long-prompt', { seed: 1, promptTokens: 100 }).request(0);
    expect(words(custom.messages[0]!.content)).toBeLessThan(160);
  });

  it('shared-prefix: one system prompt; each turn extends the previous turn of its conversation', () => {
    const w = createWorkload('shared-prefix', { seed: 3, conversations: 3, turns: 4, maxTokens: 10 });
    const system = w.request(0).messages[0]!;
    expect(system.role).toBe('system');
    expect(words(system.content)).toBeGreaterThan(1900);
    const byConversation = new Map<number, ReturnType<typeof w.request>[]>();
    for (let i = 0; i < 24; i++) {
      const r = w.request(i);
      expect(r.messages[0]).toEqual(system);
      const list = byConversation.get(r.conversation!) ?? [];
      list.push(r);
      byConversation.set(r.conversation!, list);
    }
    // Two cycles of 3 conversations × 4 turns; turns are round-robin: 0,0,0,1,1,1,…
    expect([...byConversation.keys()]).toEqual([0, 1, 2, 3, 4, 5]);
    expect([0, 1, 2, 3, 4, 5].map((i) => w.request(i).turn)).toEqual([0, 0, 0, 1, 1, 1]);
    for (const turns of byConversation.values()) {
      expect(turns.map((r) => r.turn)).toEqual([0, 1, 2, 3]);
      for (let t = 1; t < turns.length; t++) {
        const prev = turns[t - 1]!.messages;
        const cur = turns[t]!.messages;
        // The previous prompt is a strict prefix, followed by its answer and a new user message.
        expect(cur.slice(0, prev.length)).toEqual(prev);
        expect(cur.length).toBe(prev.length + 2);
        expect(cur[prev.length]!.role).toBe('assistant');
        expect(words(cur[prev.length]!.content)).toBe(10);
        expect(cur[prev.length + 1]!.role).toBe('user');
        expect(JSON.stringify(cur).length).toBeGreaterThan(JSON.stringify(prev).length);
      }
    }
    // Different conversations share only the system prompt.
    const [a, b] = [byConversation.get(0)![0]!, byConversation.get(1)![0]!];
    expect(a.messages[1]).not.toEqual(b.messages[1]);
  });
});
