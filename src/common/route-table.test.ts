import { describe, expect, it } from 'vitest';
import { RouteTable, type RouteMatch } from './route-table.js';

const table = (ignoreTrailingSlash = false) =>
  new RouteTable<string>({ ignoreTrailingSlash })
    .add('GET', '/health', 'health')
    .add('POST', '/v1/chat/completions', 'chat')
    .add('GET', '/v1/instances', 'list')
    .add('POST', '/v1/instances', 'register')
    .add('GET', '/v1/instances/:id', 'show')
    .add('DELETE', '/v1/instances/:id', 'remove')
    .add('POST', '/v1/instances/:id/drain', 'drain');

/** A match written compactly: handler name + params, `405 <allow>`, or `404`. */
function describeMatch(m: RouteMatch<string>): string {
  if (m.kind === 'not_found') return '404';
  if (m.kind === 'method_not_allowed') return `405 ${m.allow}`;
  const params = Object.entries(m.params).map(([k, v]) => ` ${k}=${v}`);
  return m.handler + params.join('');
}

describe('RouteTable.match', () => {
  it.each<[string, string, boolean, string]>([
    ['GET', '/health', false, 'health'],
    ['POST', '/v1/chat/completions', false, 'chat'],
    ['GET', '/v1/chat/completions', false, '405 POST'],
    ['PUT', '/v1/instances', false, '405 GET, POST'],
    ['GET', '/v1/instances/p-0', false, 'show id=p-0'],
    ['DELETE', '/v1/instances/p-0', false, 'remove id=p-0'],
    ['POST', '/v1/instances/p-0', false, '405 GET, DELETE'],
    ['POST', '/v1/instances/p%2F0/drain', false, 'drain id=p/0'],
    ['GET', '/v1/instances/p-0/drain', false, '405 POST'],
    ['POST', '/v1/instances/p-0/explode', false, '404'],
    ['POST', '/v1/instances/%ZZ/drain', false, '404'],
    ['POST', '/v1/instances//drain', false, '404'],
    ['GET', '/nothing', false, '404'],
    ['GET', '/health/', false, '404'],
    ['GET', '/health/', true, 'health'],
    ['GET', '/v1/instances/p-0//', true, 'show id=p-0'],
    ['GET', '/', true, '404'],
  ])('%s %s (ignoreTrailingSlash %s) → %s', (method, path, ignoreTrailingSlash, expected) => {
    expect(describeMatch(table(ignoreTrailingSlash).match(method, path))).toBe(expected);
  });

  it('a literal hit allocates nothing: the same frozen answer every time', () => {
    const t = table();
    const first = t.match('POST', '/v1/chat/completions');
    expect(t.match('POST', '/v1/chat/completions')).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(t.match('GET', '/v1/chat/completions')).toBe(t.match('PUT', '/v1/chat/completions'));
  });

  it.each([
    [
      'a duplicate method + path',
      () => table().add('GET', '/health', 'again'),
      /duplicate route GET \/health/,
    ],
    ['a duplicate pattern route', () => table().add('GET', '/v1/instances/:id', 'again'), /duplicate/],
    ['a relative path', () => table().add('GET', 'health', 'x'), /must start with/],
  ])('refuses %s', (_name, add, message) => {
    expect(add).toThrow(message);
  });
});
