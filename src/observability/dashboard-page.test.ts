import { describe, expect, it } from 'vitest';
import { DASHBOARD_HTML } from './dashboard-page.js';

describe('dashboard page text (issue 18 item 8)', () => {
  it('counts in flight as "1 leg", "2 legs" (never a bare "+ \' legs\'")', () => {
    expect(DASHBOARD_HTML).not.toMatch(/inFlight \+ ' legs'/);
    expect(DASHBOARD_HTML).toContain("(i.inFlight === 1 ? ' leg' : ' legs')");
  });
});
