import { describe, expect, it } from 'vitest';
import { isLinkLocalOrMetadataHost, isLoopbackHost, isWildcardHost } from './hosts.js';

describe('host kinds', () => {
  it.each([
    ['127.0.0.1', true, false],
    ['127.1.2.3', true, false],
    ['localhost', true, false],
    ['[::1]', true, false],
    ['0.0.0.0', false, true],
    ['::', false, true],
    ['[::]', false, true],
    ['10.0.0.5', false, false],
    ['decode.example', false, false],
    // 127.0.0.0/8 written as IPv6 that reaches it on this host (as the URL parser writes them)
    ['[::ffff:7f00:1]', true, false], // IPv4-mapped: http://[::ffff:127.0.0.1]/
    ['[::ffff:0:7f00:1]', true, false], // IPv4-translated
    ['[::7f00:1]', true, false], // IPv4-compatible
    ['[::ffff:a00:5]', false, false],
    ['[64:ff9b::7f00:1]', false, false], // NAT64 goes to a gateway, not this host
  ])('%s: loopback %s, wildcard %s', (host, loopback, wildcard) => {
    expect(isLoopbackHost(host)).toBe(loopback);
    expect(isWildcardHost(host)).toBe(wildcard);
  });
});

describe('isLinkLocalOrMetadataHost (instance URLs the management API refuses)', () => {
  it.each([
    ['169.254.169.254', true],
    ['169.254.0.1', true],
    ['[fe80::1]', true],
    ['[febf::1]', true],
    ['[fec0::1]', false],
    ['[::ffff:a9fe:a9fe]', true], // http://[::ffff:169.254.169.254]/ as the URL parser writes it
    ['[::ffff:a00:5]', false],
    // IPv6 spellings that reach an IPv4 metadata or link-local address (as the URL parser writes them)
    ['[::ffff:0:a9fe:a9fe]', true], // IPv4-translated
    ['[::a9fe:a9fe]', true], // IPv4-compatible: http://[::169.254.169.254]/
    ['[64:ff9b::a9fe:a9fe]', true], // NAT64 well-known prefix
    ['[64:ff9b:0:0:0:0:a9fe:a9fe]', true],
    ['[64:ff9b::a00:5]', false],
    ['[::ffff:6464:64c8]', true], // Alibaba 100.100.100.200, mapped
    ['168.63.129.16', true], // Azure WireServer
    ['[::ffff:a83f:8110]', true],
    ['[64:ff9b::a83f:8110]', true],
    ['[2001:db8::a9fe:a9fe]', false],
    ['metadata.google.internal', true],
    ['Metadata.Google.Internal.', true],
    ['metadata', true],
    ['100.100.100.200', true],
    ['[fd00:ec2::254]', true],
    ['127.0.0.1', false],
    ['10.0.0.5', false],
    ['169.255.0.1', false],
    ['decode.example', false],
  ])('%s → %s', (host, expected) => {
    expect(isLinkLocalOrMetadataHost(host)).toBe(expected);
  });

  it('sees through the URL forms an address can be written in', () => {
    for (const url of [
      'http://2852039166/',
      'http://0xa9.0xfe.0xa9.0xfe/',
      'http://[::ffff:169.254.169.254]/',
    ])
      expect(isLinkLocalOrMetadataHost(new URL(url).hostname), url).toBe(true);
  });
});
