import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { PEER_SECRET_HEADER, parsePeerSecrets, PeerSecrets } from './peer-secrets.js';

const A = 'aaaaaaaaaaaaaaaa-one';
const B = 'bbbbbbbbbbbbbbbb-two';

describe('parsePeerSecrets', () => {
  const cases: Array<{ name: string; text: string; want: string[] | string }> = [
    { name: 'one secret', text: A, want: [A] },
    { name: 'lines, first sent', text: `${B}\n${A}\n`, want: [B, A] },
    { name: 'comma-separated (env)', text: `${B},${A}`, want: [B, A] },
    { name: 'blank lines, spaces, CRLF, duplicates', text: `\r\n  ${A} \r\n\n${A}\n`, want: [A] },
    { name: 'empty', text: ' \n', want: 'f: no peer secret in it' },
    { name: 'too short', text: `${A}\nshort`, want: 'f: peer secret #2 is shorter than 16 characters' },
  ];
  it.each(cases)('$name', ({ text, want }) => {
    if (typeof want === 'string') expect(() => parsePeerSecrets(text, 'f')).toThrow(want);
    else expect(parsePeerSecrets(text, 'f')).toEqual(want);
  });

  it('never puts a secret in its error', () => {
    expect(() => parsePeerSecrets('tiny-secret', 'f')).toThrow(/^f: peer secret #1 is shorter/);
    try {
      parsePeerSecrets('tiny-secret', 'f');
    } catch (err) {
      expect((err as Error).message).not.toContain('tiny-secret');
    }
  });
});

describe('PeerSecrets', () => {
  it('sends the first, accepts each, refuses anything else', async () => {
    const s = await PeerSecrets.load({ secrets: [B, A] });
    expect(s.header).toEqual({ [PEER_SECRET_HEADER]: B });
    const presented: Array<[unknown, boolean]> = [
      [A, true],
      [B, true],
      [`${A} `, false],
      [A.slice(1), false],
      ['', false],
      [undefined, false],
      [[A], false],
    ];
    for (const [value, ok] of presented) expect(s.accepts(value as string)).toBe(ok);
  });

  it('tokens: per id, 22 base64url characters, accepted under any listed secret only', async () => {
    const old = await PeerSecrets.load({ secrets: [A] });
    const both = await PeerSecrets.load({ secrets: [B, A] });
    const t = old.tokenFor('r#a1');
    expect(t).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(t).not.toBe(old.tokenFor('r#a2'));
    expect(both.acceptsToken('r#a1', t)).toBe(true);
    expect(both.acceptsToken('r#a2', t)).toBe(false);
    expect(old.acceptsToken('r#a1', both.tokenFor('r#a1'))).toBe(false);
    expect(both.acceptsToken('r#a1', t.slice(1))).toBe(false);
  });

  describe('a file, re-read when it changes (rotation without restart)', () => {
    let dir: string;
    let secrets: PeerSecrets | undefined;
    afterEach(() => secrets?.close());
    afterAll(() => rm(dir, { recursive: true, force: true }));

    it('old+new accepted, then old refused; an unusable rewrite keeps the secrets in use', async () => {
      dir = await mkdtemp(join(tmpdir(), 'motor-peer-secret-'));
      const file = join(dir, 'secret');
      await writeFile(file, `${A}\n`);
      secrets = await PeerSecrets.load({ file, pollMs: 10 });
      expect([secrets.accepts(A), secrets.accepts(B)]).toEqual([true, false]);
      const steps: Array<{
        text: string;
        event: 'reload' | 'reload_failed';
        sent: string;
        a: boolean;
        b: boolean;
      }> = [
        { text: `${A}\n${B}\n`, event: 'reload', sent: A, a: true, b: true }, // new accepted everywhere first
        { text: `${B}\n${A}\n`, event: 'reload', sent: B, a: true, b: true }, // then sent
        { text: `${B}\n`, event: 'reload', sent: B, a: false, b: true }, // old retired
        { text: '\n', event: 'reload_failed', sent: B, a: false, b: true }, // emptied by mistake: kept
      ];
      for (const step of steps) {
        const seen = once(secrets, step.event);
        await writeFile(file, step.text);
        await seen;
        expect(secrets.header[PEER_SECRET_HEADER]).toBe(step.sent);
        expect([secrets.accepts(A), secrets.accepts(B)]).toEqual([step.a, step.b]);
      }
    });

    it('a missing file is a one-line start-up error', async () => {
      await expect(PeerSecrets.load({ file: '/nonexistent/motor-secret' })).rejects.toThrow(
        'peer secret file /nonexistent/motor-secret: ENOENT',
      );
    });
  });
});
