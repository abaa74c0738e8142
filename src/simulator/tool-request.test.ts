import { describe, expect, it } from 'vitest';
import { RequestError } from './request-error.js';
import { decideToolCall } from './tool-request.js';

const fn = (name: string) => ({ type: 'function', function: { name, parameters: { type: 'object' } } });
const TOOLS = [fn('get_weather'), fn('search_web')];
const user = (content: string) => [{ role: 'user', content }];

describe('decideToolCall', () => {
  it.each<[string, Record<string, unknown>, { role: string; content: string }[], unknown]>([
    ['no tools → text', {}, user('get_weather'), null],
    [
      'auto (default), a tool named → that call',
      { tools: TOOLS },
      user('Call SEARCH_WEB please'),
      { name: 'search_web', finish: 'tool_calls', content: null },
    ],
    [
      'auto, first tool in `tools` order wins',
      { tools: TOOLS, tool_choice: 'auto' },
      user('search_web or get_weather'),
      { name: 'get_weather' },
    ],
    ['auto, no tool named → text', { tools: TOOLS }, user('hello'), null],
    [
      'auto, the last message is a tool result → text (agent loops end)',
      { tools: TOOLS },
      [...user('get_weather'), { role: 'assistant', content: '' }, { role: 'tool', content: '{"t": 20}' }],
      null,
    ],
    ['none → text', { tools: TOOLS, tool_choice: 'none' }, user('get_weather'), null],
    [
      'required → the mentioned tool',
      { tools: TOOLS, tool_choice: 'required' },
      user('search_web'),
      { name: 'search_web', finish: 'tool_calls', content: '' },
    ],
    [
      'required, nothing mentioned → the first tool',
      { tools: TOOLS, tool_choice: 'required' },
      user('hi'),
      { name: 'get_weather' },
    ],
    [
      'required after a tool result → still a call (vLLM always calls)',
      { tools: TOOLS, tool_choice: 'required' },
      [{ role: 'tool', content: 'x' }],
      { name: 'get_weather' },
    ],
    [
      'named → that tool, finish_reason "stop"',
      { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'search_web' } } },
      user('get_weather'),
      { name: 'search_web', finish: 'stop', content: '' },
    ],
  ])('%s', (_name, body, messages, expected) => {
    const d = decideToolCall(body, messages);
    if (expected === null) expect(d).toBeNull();
    else expect(d).toMatchObject(expected as Record<string, unknown>);
  });

  it('a tool without parameters gets an empty object schema', () => {
    const d = decideToolCall(
      { tools: [{ type: 'function', function: { name: 'now' } }], tool_choice: 'required' },
      user('x'),
    );
    expect(d?.parameters).toEqual({ type: 'object', properties: {} });
  });

  it.each<[string, Record<string, unknown>]>([
    [
      'a named tool that was not sent',
      { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } },
    ],
    ['tool_choice without tools', { tool_choice: 'required' }],
    ['tools not an array', { tools: { name: 'x' } }],
    ['a tool without a name', { tools: [{ type: 'function', function: {} }] }],
    ['an unknown tool_choice', { tools: TOOLS, tool_choice: 'always' }],
    [
      'parameters not an object',
      { tools: [{ type: 'function', function: { name: 'x', parameters: 'str' } }] },
    ],
  ])('400 for %s', (_name, body) => {
    expect(() => decideToolCall(body, user('x'))).toThrow(RequestError);
  });
});
