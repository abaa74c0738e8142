import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMotor, type MotorProcess } from './helpers/motor-process.js';

/** The real `openai` client against a `motor sim` process: the shapes its helpers parse. */
let sim: MotorProcess;
let client: OpenAI;
beforeAll(async () => {
  sim = await startMotor(['sim', '--time-scale', '0', '--port', '0']);
  client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await sim?.stop();
});

describe('openai client ↔ motor sim', () => {
  it.each([false, true])(
    'runTools() calls the function tool and ends with text (stream %s)',
    async (stream) => {
      const calls: unknown[] = [];
      const tools = [
        {
          type: 'function' as const,
          function: {
            name: 'get_weather',
            description: 'weather for a city',
            parameters: {
              type: 'object',
              properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
              required: ['city', 'unit'],
            },
            function: (args: { city: string; unit: string }) => {
              calls.push(args);
              return { temperature: 21, unit: args.unit };
            },
            parse: (s: string) => JSON.parse(s) as { city: string; unit: string },
          },
        },
      ];
      const messages = [{ role: 'user' as const, content: 'What is the weather in Paris? Use get_weather.' }];
      const runner = stream
        ? client.chat.completions.runTools({
            model: 'motor-sim-7b',
            messages,
            tools,
            stream: true,
            seed: 3,
          })
        : client.chat.completions.runTools({
            model: 'motor-sim-7b',
            messages,
            tools,
            seed: 3,
          });
      const final = await runner.finalChatCompletion();
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ unit: 'c' });
      expect(typeof (calls[0] as { city: string }).city).toBe('string');
      expect(final.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
      expect(final.choices[0]!.message.content).toMatch(/\w/);
      const roles = runner.messages.map((m) => m.role);
      expect(roles).toEqual(['user', 'assistant', 'tool', 'assistant']);
    },
  );

  it('chat.completions.parse() with a zod schema returns a parsed object valid against it', async () => {
    const Person = z.object({
      name: z.string(),
      age: z.number().int().min(18),
      hobbies: z.array(z.string()).min(1),
      address: z.object({ city: z.string(), zip: z.string().nullable() }),
    });
    const r = await client.chat.completions.parse({
      model: 'motor-sim-7b',
      messages: [{ role: 'user', content: 'Invent a person.' }],
      response_format: zodResponseFormat(Person, 'person'),
    });
    const parsed = r.choices[0]!.message.parsed;
    expect(Person.safeParse(parsed).success).toBe(true);
    expect(parsed!.age).toBe(18);
  });

  it('logprobs and n: 2 through the client types', async () => {
    const r = await client.chat.completions.create({
      model: 'motor-sim-7b',
      messages: [{ role: 'user', content: 'Say something.' }],
      n: 2,
      max_tokens: 4,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    for (const c of r.choices) {
      expect(c.logprobs!.content).toHaveLength(4);
      expect(c.logprobs!.content![0]!.top_logprobs).toHaveLength(2);
    }
    expect(r.usage!.completion_tokens).toBe(8);
  });

  it('embeddings.create() (the client asks for base64 and decodes it)', async () => {
    const r = await client.embeddings.create({ model: 'motor-sim-7b', input: ['hello', 'world'] });
    expect(r.data).toHaveLength(2);
    const v = r.data[0]!.embedding;
    expect(v).toHaveLength(384);
    expect(Math.sqrt(v.reduce((s, x) => s + x * x, 0))).toBeCloseTo(1, 4);
    expect(r.usage.prompt_tokens).toBe(2);
  });
});
