import { expect, it } from 'vitest';
import { fileErrorText, listenErrorText } from './os-errors.js';

const errno = (fields: Record<string, unknown>): Error => Object.assign(new Error('raw'), fields);

it.each([
  [
    { code: 'EADDRINUSE', syscall: 'listen', address: '127.0.0.1', port: 8000 },
    'port 8000 on 127.0.0.1 is already in use',
  ],
  [
    { code: 'EACCES', syscall: 'listen', address: '0.0.0.0', port: 80 },
    'no permission to listen on 0.0.0.0:80 (ports below 1024 need privileges)',
  ],
  [
    { code: 'EADDRNOTAVAIL', syscall: 'listen', address: '10.9.9.9', port: 1 },
    'cannot listen on 10.9.9.9: not an address of this host',
  ],
  [
    { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname: 'nohost' },
    'cannot listen on nohost: host name not found',
  ],
  [{ code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1', port: 1 }, undefined],
])('listenErrorText %o', (fields, text) => {
  expect(listenErrorText(errno(fields))).toBe(text);
});

it.each([
  ['ENOENT', 'not found'],
  ['EISDIR', 'is a directory'],
  ['EACCES', 'permission denied'],
  ['EIO', 'raw'],
])('fileErrorText %s', (code, text) => {
  expect(fileErrorText(errno({ code }))).toBe(text);
});
