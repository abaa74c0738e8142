import { describe, expect, it } from 'vitest';
import type { TargetResult } from './runner.js';
import { escapeXml, niceScale, renderSvg } from './svg-chart.js';
import { xmlProblem } from './well-formed-xml.js';

function assertWellFormedSvg(svg: string): void {
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  expect(xmlProblem(svg)).toBeNull();
}

function result(name: string, scale: number, failed = 0): TargetResult {
  const dist = (base: number) => ({
    count: 10,
    mean: base,
    min: base / 2,
    p50: base,
    p90: base * 2,
    p99: base * 3,
    max: base * 4,
  });
  return {
    name,
    url: 'http://127.0.0.1:1/v1',
    model: 'm',
    requests: 10 + failed,
    ok: 10,
    failed,
    durationS: 1,
    requestsPerS: 10 / scale,
    outputTokensPerS: 640 / scale,
    ttftMs: dist(20 * scale),
    itlMs: dist(15 * scale),
    e2eMs: dist(1000 * scale),
    promptTokens: 100,
    cachedTokens: 40,
    outputTokens: 640,
    prefixCacheHitRate: 0.4,
    errors: failed ? { http_503: failed } : {},
    errorExamples: failed ? { http_503: 'no capacity' } : {},
  };
}

describe('renderSvg', () => {
  it('is well-formed, names every target once in the legend and escapes text', () => {
    const svg = renderSvg([result('sim', 1), result('motor <P&D>', 1.3, 2)], 'A & B <test>', 'sub "title"');
    assertWellFormedSvg(svg);
    expect(svg).toContain('motor &lt;P&amp;D&gt; (2 errors)');
    expect(svg).toContain('A &amp; B &lt;test&gt;');
    expect(svg).not.toContain('NaN');
    // 6 panels × (3+3+3+1+1+1 groups) bars per target
    expect(svg.match(/<rect [^>]*><title>/g)).toHaveLength(2 * 12);
  });

  it('handles missing values (no successful requests) without NaN coordinates', () => {
    const empty = result('down', 1);
    const nan = { count: 0, mean: NaN, min: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
    Object.assign(empty, {
      ok: 0,
      ttftMs: nan,
      itlMs: nan,
      e2eMs: nan,
      requestsPerS: 0,
      prefixCacheHitRate: NaN,
    });
    const svg = renderSvg([empty], 'empty');
    assertWellFormedSvg(svg);
    expect(svg).not.toContain('NaN');
  });
});

describe('niceScale', () => {
  it.each([
    [0, 1, 0.25],
    [7, 8, 2],
    [100, 100, 25],
    [251, 300, 100],
    [0.9, 1, 0.25],
    [12.8, 15, 5],
  ])('max %d → top %d step %d', (max, top, step) => {
    expect(niceScale(max)).toEqual({ top, step });
  });
});

it('xmlProblem finds unbalanced tags, unquoted attributes and raw specials', () => {
  expect(xmlProblem('<svg><g></g></svg>')).toBeNull();
  expect(xmlProblem('<svg><g></svg>')).toMatch(/closes <g>/);
  expect(xmlProblem('<svg><text>a < b</text></svg>')).not.toBeNull();
  expect(xmlProblem('<svg><text>a & b</text></svg>')).not.toBeNull();
  expect(xmlProblem('<svg><rect x=1/></svg>')).not.toBeNull();
});

it('escapeXml escapes the five XML specials', () => {
  expect(escapeXml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;');
});

describe('value labels clear their panel title (issue 18 item 8)', () => {
  it.each([1, 1.7, 3])('scale %s: every label sits at least one line below the title', (scale) => {
    const svg = renderSvg([result('a', scale), result('b', scale / 2)], 't');
    for (const panel of svg.split('<g>').slice(1)) {
      const titleY = Number(/<text x="[\d.]+" y="([\d.]+)" font-size="13"/.exec(panel)![1]);
      const labels = [
        ...panel.matchAll(/<text x="[\d.]+" y="([\d.]+)" text-anchor="middle" fill="#333" font-size="10">/g),
      ];
      expect(labels.length).toBeGreaterThan(0);
      for (const m of labels) expect(Number(m[1])).toBeGreaterThanOrEqual(titleY + 12);
    }
  });
});
