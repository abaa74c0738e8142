import { describe, expect, it } from 'vitest';
import { DASHBOARD_HTML } from './dashboard-page.js';

describe('dashboard page text (issue 18 item 8)', () => {
  it('counts in flight as "1 leg", "2 legs" (never a bare "+ \' legs\'")', () => {
    expect(DASHBOARD_HTML).not.toMatch(/inFlight \+ ' legs'/);
    expect(DASHBOARD_HTML).toContain("(i.inFlight === 1 ? ' leg' : ' legs')");
  });
});

describe('dashboard layout (issue 18 item 8)', () => {
  it('the leg legend sits with the request timelines, and the rate chart has axis labels', () => {
    const rate = DASHBOARD_HTML.indexOf('Request rate');
    const recent = DASHBOARD_HTML.indexOf('Recent requests');
    const legend = DASHBOARD_HTML.indexOf('prefill leg</span>');
    expect(legend).toBeGreaterThan(recent);
    const rateSection = DASHBOARD_HTML.slice(rate, DASHBOARD_HTML.indexOf('</section>', rate));
    expect(rateSection).toContain('class="axis"');
    expect(rateSection).toContain('now');
  });
});

it("the page's script parses", () => {
  const script = /<script>([\s\S]*)<\/script>/.exec(DASHBOARD_HTML)![1]!;
  expect(() => new Function(script)).not.toThrow();
});
