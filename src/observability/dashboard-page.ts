/**
 * The dashboard: one self-contained HTML page (no framework, no build step, no external requests)
 * that polls `/dashboard/api/state` and renders the fleet, live rate and latency, and recent
 * requests as prefill → decode timelines. Everything from the server is inserted with textContent.
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Motor dashboard</title>
<style>
  :root { --bg:#0f1419; --panel:#171e26; --line:#26303b; --fg:#e6edf3; --dim:#8b98a5;
          --prefill:#4f8ff7; --decode:#3fb950; --single:#d29922; --err:#f85149; --fb:#ffffff; }
  * { box-sizing: border-box; }
  body { margin:0; background:var(--bg); color:var(--fg); font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; }
  header { display:flex; align-items:baseline; gap:16px; padding:14px 24px; border-bottom:1px solid var(--line); }
  header h1 { margin:0; font-size:20px; letter-spacing:.5px; }
  header .sub { color:var(--dim); }
  header #status { margin-left:auto; color:var(--dim); }
  header #status.live::before { content:"●"; color:var(--decode); margin-right:6px; }
  main { padding:16px 24px; display:grid; gap:16px; }
  .cards { display:grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap:12px; }
  .card, section { background:var(--panel); border:1px solid var(--line); border-radius:8px; }
  .card { padding:12px 14px; }
  .card .label { color:var(--dim); font-size:12px; text-transform:uppercase; letter-spacing:.6px; }
  .card .value { font-size:24px; font-weight:600; margin-top:4px; font-variant-numeric: tabular-nums; }
  .card .value small { font-size:12px; color:var(--dim); font-weight:400; }
  .card .value.pct { font-size:15px; margin-top:10px; white-space:nowrap; }
  section { padding:12px 14px; }
  section h2 { margin:0 0 10px; font-size:14px; color:var(--dim); text-transform:uppercase; letter-spacing:.6px; }
  table { width:100%; border-collapse:collapse; font-variant-numeric: tabular-nums; }
  th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); white-space:nowrap; }
  th { color:var(--dim); font-weight:500; font-size:12px; }
  td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12px; }
  .pill { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; border:1px solid var(--line); }
  .role-prefill { color:var(--prefill); border-color:var(--prefill); }
  .role-decode { color:var(--decode); border-color:var(--decode); }
  .role-union { color:var(--single); border-color:var(--single); }
  .ok { color:var(--decode); } .bad { color:var(--err); } .dim { color:var(--dim); }
  .load { display:inline-block; height:8px; background:var(--prefill); border-radius:4px; vertical-align:middle; margin-right:6px; }
  .grid2 { display:grid; grid-template-columns: 2fr 3fr; gap:16px; }
  @media (max-width: 1000px) { .grid2 { grid-template-columns: 1fr; } }
  svg.spark { width:100%; height:80px; display:block; border-left:1px solid var(--dim); border-bottom:1px solid var(--dim); }
  .axis { display:flex; justify-content:space-between; color:var(--dim); font-size:11px; margin-top:2px; }
  .timeline { position:relative; height:18px; min-width:260px; background:#0b1016; border-radius:3px; }
  .bar { position:absolute; top:3px; height:12px; border-radius:2px; }
  .bar.prefill { background:var(--prefill); } .bar.decode { background:var(--decode); }
  .bar.single { background:var(--single); } .bar.failed { background:var(--err); opacity:.85; }
  .bar.continued { background-image:repeating-linear-gradient(135deg, transparent 0 3px, rgba(0,0,0,.45) 3px 5px); }
  .tick { position:absolute; top:0; width:2px; height:18px; background:var(--fb); opacity:.8; }
  .legend span { margin-right:14px; color:var(--dim); font-size:12px; }
  .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
</style>
</head>
<body>
<header>
  <h1>Motor</h1><span class="sub">prefill/decode coordinator</span>
  <span id="status">connecting…</span>
</header>
<main>
  <div class="cards">
    <div class="card"><div class="label">Requests / s (1 min)</div><div class="value" id="rps">–</div></div>
    <div class="card"><div class="label">In flight</div><div class="value" id="inflight">–</div></div>
    <div class="card"><div class="label">Requests served</div><div class="value" id="total">–</div></div>
    <div class="card"><div class="label">Errors (1 min)</div><div class="value" id="errors">–</div></div>
    <div class="card"><div class="label">TTFT p50 / p90 / p99</div><div class="value pct" id="ttft">–</div></div>
    <div class="card"><div class="label">E2E p50 / p90 / p99</div><div class="value pct" id="e2e">–</div></div>
  </div>
  <div class="grid2">
    <section>
      <h2>Fleet</h2>
      <table><thead><tr><th>Instance</th><th>Role</th><th>Health</th><th>Circuit</th><th>Load</th></tr></thead>
      <tbody id="fleet"></tbody></table>
    </section>
    <section>
      <h2>Request rate (last 60 s)</h2>
      <svg class="spark" id="spark" viewBox="0 0 600 80" preserveAspectRatio="none"></svg>
      <div class="axis"><span>−60 s</span><span id="spark-max">y: requests per second</span><span>now</span></div>
    </section>
  </div>
  <section id="kv-section" hidden>
    <h2>KV block index (engine KV events)</h2>
    <table><thead><tr><th>Instance</th><th>Blocks</th><th>Last batch</th><th>Lag</th><th>Gaps</th><th>Resyncs</th></tr></thead>
    <tbody id="kv"></tbody></table>
    <div class="dim" id="kv-total"></div>
  </section>
  <section>
    <h2>Recent requests (P → D timelines)</h2>
    <div class="legend" style="margin-bottom:8px">
      <span><i style="background:var(--prefill)"></i>prefill leg</span>
      <span><i style="background:var(--decode)"></i>decode leg</span>
      <span><i style="background:var(--single)"></i>single leg</span>
      <span><i style="background:var(--err)"></i>failed leg</span>
      <span><i style="background:var(--fb)"></i>first byte</span>
    </div>
    <table><thead><tr><th>Request</th><th>Plan</th><th>Status</th><th>Attempts</th><th>TTFT</th><th>Duration</th><th>Instances</th><th style="width:40%">Timeline</th></tr></thead>
    <tbody id="recent"></tbody></table>
  </section>
</main>
<script>
(function () {
  'use strict';
  var params = new URLSearchParams(location.search);
  var intervalMs = Math.max(200, Number(params.get('interval')) || 1000);
  // observability.requireApiKey: the key comes in the URL fragment, which the browser never sends
  var key = new URLSearchParams(location.hash.slice(1)).get('key');
  var authHeaders = key ? { authorization: 'Bearer ' + key } : {};
  var $ = function (id) { return document.getElementById(id); };
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function ms(v) {
    if (v === null || v === undefined) return '–';
    return v >= 1000 ? (v / 1000).toFixed(2) + ' s' : Math.round(v) + ' ms';
  }
  function pct(p) { return p ? ms(p.p50) + ' / ' + ms(p.p90) + ' / ' + ms(p.p99) : '–'; }
  function setText(id, text) { $(id).textContent = text; }

  function renderFleet(instances) {
    var body = $('fleet');
    body.replaceChildren();
    var max = 1;
    instances.forEach(function (i) { if (i.inFlight > max) max = i.inFlight; });
    instances.forEach(function (i) {
      var tr = el('tr', 'instance-row');
      tr.dataset.instance = i.id;
      var id = el('td', 'mono'); id.appendChild(el('div', null, i.id)); id.appendChild(el('div', 'dim', i.url));
      tr.appendChild(id);
      var role = el('td'); role.appendChild(el('span', 'pill role-' + i.role, i.role)); tr.appendChild(role);
      tr.appendChild(el('td', i.routable ? 'ok' : 'bad', i.health));
      tr.appendChild(el('td', i.circuit === 'open' ? 'bad' : i.circuit === 'closed' ? 'ok' : 'dim', i.circuit || 'n/a'));
      var load = el('td');
      var bar = el('span', 'load'); bar.style.width = Math.round(4 + 80 * i.inFlight / max) + 'px';
      load.appendChild(bar); load.appendChild(document.createTextNode(i.inFlight + (i.inFlight === 1 ? ' leg' : ' legs')));
      tr.appendChild(load);
      body.appendChild(tr);
    });
  }

  function renderSpark(perSecond) {
    var svg = $('spark');
    var max = Math.max(1, Math.max.apply(null, perSecond));
    $('spark-max').textContent = 'y: requests per second, top = ' + max;
    var w = 600 / perSecond.length;
    var ns = 'http://www.w3.org/2000/svg';
    svg.replaceChildren();
    perSecond.forEach(function (n, k) {
      var h = 76 * n / max;
      var r = document.createElementNS(ns, 'rect');
      r.setAttribute('x', String(k * w + 1)); r.setAttribute('width', String(Math.max(1, w - 2)));
      r.setAttribute('y', String(80 - h)); r.setAttribute('height', String(h));
      r.setAttribute('fill', '#4f8ff7');
      svg.appendChild(r);
    });
  }

  function renderTimeline(r) {
    var box = el('div', 'timeline');
    var total = Math.max(1, r.durationMs);
    r.legs.forEach(function (l) {
      var end = l.endMs === null ? r.durationMs : l.endMs;
      var b = el('div', 'bar ' + (l.error ? 'failed' : l.role) + (l.migration > 0 ? ' continued' : ''));
      b.style.left = (100 * l.startMs / total).toFixed(2) + '%';
      b.style.width = Math.max(0.5, 100 * (end - l.startMs) / total).toFixed(2) + '%';
      b.title = l.role + ' on ' + l.instance + ' (attempt ' + l.attempt + '): ' + ms(l.startMs) + ' → ' + ms(end) + (l.error ? ' ' + l.error : '') + (l.migration > 0 ? ' — continuation after migration ' + l.migration : '');
      box.appendChild(b);
      if (l.firstByteMs !== null && l.role !== 'prefill') {
        var t = el('div', 'tick'); t.style.left = (100 * l.firstByteMs / total).toFixed(2) + '%';
        box.appendChild(t);
      }
    });
    return box;
  }

  function renderRecent(recent) {
    var body = $('recent');
    body.replaceChildren();
    recent.slice(0, 25).forEach(function (r) {
      var tr = el('tr', 'request-row');
      tr.appendChild(el('td', 'mono', r.id.replace(/^req-/, '').slice(0, 8)));
      tr.appendChild(el('td', null, r.plan));
      tr.appendChild(el('td', r.outcome === 'ok' ? 'ok' : 'bad', r.outcome === 'ok' ? r.status : r.status + ' ' + r.outcome));
      tr.appendChild(el('td', null, r.migrations > 0 ? r.attempts + ' (' + r.migrations + ' migrated)' : r.attempts));
      tr.appendChild(el('td', null, ms(r.ttftMs)));
      tr.appendChild(el('td', null, ms(r.durationMs)));
      var inst = [];
      r.legs.forEach(function (l) { if (inst.indexOf(l.instance) < 0) inst.push(l.instance); });
      tr.appendChild(el('td', 'mono', inst.join(' → ')));
      var tl = el('td'); tl.appendChild(renderTimeline(r)); tr.appendChild(tl);
      body.appendChild(tr);
    });
  }

  function renderKv(kv) {
    $('kv-section').hidden = !kv;
    if (!kv) return;
    var body = $('kv');
    body.replaceChildren();
    kv.instances.forEach(function (i) {
      var tr = el('tr');
      tr.appendChild(el('td', 'mono', i.instance));
      tr.appendChild(el('td', null, i.blocks));
      var last = i.error ? i.error : i.lastBatchAgeMs === null ? 'none yet' : ms(i.lastBatchAgeMs) + ' ago';
      tr.appendChild(el('td', i.error ? 'bad' : null, last));
      tr.appendChild(el('td', null, ms(i.lagMs)));
      tr.appendChild(el('td', i.gaps ? 'bad' : null, i.gaps));
      tr.appendChild(el('td', i.resyncs ? 'bad' : null, i.resyncs));
      body.appendChild(tr);
    });
    setText('kv-total', kv.indexedBlocks + ' distinct blocks indexed, ' + kv.forgottenBlocks + ' forgotten to stay within kvEvents.maxIndexedBlocks');
  }

  function render(s) {
    setText('rps', s.window.requestsPerSecond.toFixed(2));
    setText('inflight', s.inFlight);
    setText('total', s.totals.requests);
    setText('errors', s.window.errors);
    setText('ttft', pct(s.window.ttftMs));
    setText('e2e', pct(s.window.durationMs));
    renderFleet(s.instances);
    renderSpark(s.window.perSecond);
    renderRecent(s.recent);
    renderKv(s.kvEvents);
    document.body.dataset.requests = String(s.totals.requests);
    document.body.dataset.ready = 'true';
    var st = $('status'); st.className = 'live'; st.textContent = 'live · ' + new Date(s.now).toLocaleTimeString();
  }

  function poll() {
    fetch('/dashboard/api/state', { cache: 'no-store', headers: authHeaders })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then(render)
      .catch(function (e) { var st = $('status'); st.className = ''; st.textContent = 'disconnected: ' + e.message; })
      .finally(function () { setTimeout(poll, intervalMs); });
  }
  poll();
})();
</script>
</body>
</html>
`;
