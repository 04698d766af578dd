"""The dashboard's page: one HTML document, CSS and JS inline, nothing fetched but this server's own endpoints.

What it shows (data from ``/api/runs``, polled every few seconds, so that new
runs appear and pending summaries fill in):

- the **runs table**: name, time, command, ranks, GPUs, steps, step time
  (mean; p50 and p90 in the tooltip), the largest bottleneck (the biggest
  breakdown state other than idle, with its share), the critical path's
  top category, the peak device memory (the allocator's, MiB) and the matrix
  work's share of the GPUs' peak (MFU), the share of the steps the GPUs waited for
  data (the slowest rank's); sortable (click a header) and filtered
  by a text box over every column; a broken run is a row with its error;
- **trends**: inline SVG of the mean step time across runs (in time order)
  and of each run's breakdown (stacked shares per state);
- per run, **Report** (``/report``, rendered when asked, shown in a frame),
  **Perfetto** (``POST /api/perfetto``: opens the Perfetto UI, or says the
  ``di view`` command), and two check boxes **A** / **B** that pick the runs
  to **Compare** (``/diff``, shown in the same frame);
- the ``di.report_panels`` plugins that the reports include.

Responsive: the table scrolls sideways in its box, and below 720 px wide the
less needed columns (command, GPUs, steps, critical path, memory, matrix work) are hidden.
"""

from __future__ import annotations

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:12px 20px;display:flex;flex-wrap:wrap;gap:8px 18px;align-items:baseline}
header h1{margin:0;font-size:19px}header p{margin:0;color:#b8c0d0;font-size:12px;word-break:break-all}
main{padding:6px 20px 40px;max-width:1400px}
section{background:#fff;border-radius:6px;padding:10px 16px;margin:12px 0;box-shadow:0 1px 2px rgba(0,0,0,.08)}
h2{font-size:16px;margin:2px 0 8px}
.bar{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:8px}
input[type=search]{flex:1 1 220px;padding:5px 8px;border:1px solid #c9ced8;border-radius:4px;font:inherit}
button{font:inherit;font-size:12.5px;padding:3px 9px;border:1px solid #9aa6bd;border-radius:4px;background:#eef1f6;color:#1d2330;cursor:pointer}
button:hover{background:#dde3ee}button:disabled{opacity:.5;cursor:default}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:12.5px;width:100%}th,td{padding:4px 8px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#f0f2f5;cursor:pointer;white-space:nowrap;user-select:none}th[data-dir=asc]:after{content:" \\25B2"}th[data-dir=desc]:after{content:" \\25BC"}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td.cmd{font-family:ui-monospace,monospace;font-size:11.5px;max-width:28em;overflow-wrap:anywhere}
td.pick,td.time,td.actions{white-space:nowrap}td.err{min-width:16em;max-width:36em;overflow-wrap:anywhere}
tr.error td{color:#a00}tr.pending td{color:#8a93a5}tr.sel td{background:#eef3ff}
.note{color:#5b6475;font-size:12px;margin:4px 0}.err{color:#a00}
.trends{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}
.trends svg{width:100%;height:auto;display:block}.legend span{display:inline-block;margin-right:10px;font-size:11.5px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
#viewer iframe{width:100%;height:75vh;border:1px solid #d5dae3;border-radius:4px;background:#fff}
#viewer[hidden]{display:none}
@media (max-width:720px){
 header{padding:10px 12px}main{padding:4px 8px 30px}section{padding:8px 10px}
 .wide{display:none}td.cmd{max-width:12em}#viewer iframe{height:70vh}
}
"""

JS = r"""
"use strict";
var state = {runs: [], sort: {key: "time", dir: "desc"}, a: null, b: null, timer: null};
var STATES = ["compute", "comm", "memory", "sync", "cpu", "io", "untraced", "idle"];
var COLORS = {compute: "#5c6bc0", comm: "#ef6c00", memory: "#00897b", sync: "#c62828", cpu: "#8d6e63", io: "#6a1b9a", untraced: "#9e9d24", idle: "#cfd8dc"};
var COLUMNS = [
  {key: "pick", label: "A / B", sort: false},
  {key: "name", label: "run"},
  {key: "time", label: "time"},
  {key: "command", label: "command", wide: true},
  {key: "ranks", label: "ranks", num: true},
  {key: "gpus", label: "GPUs", num: true, wide: true},
  {key: "steps", label: "steps", num: true, wide: true},
  {key: "step", label: "step time (ms)", num: true},
  {key: "bottleneck", label: "largest bottleneck"},
  {key: "cp", label: "critical path top", wide: true},
  {key: "memory", label: "peak memory (MiB)", num: true, wide: true},
  {key: "mfu", label: "matrix work (% of peak)", num: true, wide: true},
  {key: "data", label: "waiting for data (% of steps)", num: true, wide: true},
  {key: "actions", label: "", sort: false}
];

function el(tag, attrs, text) {
  var e = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function ms(ns) { return ns === null || ns === undefined ? "—" : (ns / 1e6).toFixed(3); }
function pct(x) { return x === null || x === undefined ? "" : (100 * x).toFixed(1) + " %"; }
function sortValue(r, key) {
  if (key === "step") return r.step_ns ? r.step_ns.mean : null;
  if (key === "bottleneck") return r.bottleneck ? r.bottleneck.state + " " + pct(r.bottleneck.share) : (r.error || "");
  if (key === "cp") return r.cp_top ? r.cp_top.category : "";
  if (key === "memory") return r.memory_peak_bytes === undefined ? null : r.memory_peak_bytes;
  if (key === "mfu") return r.flop_utilization === undefined ? null : r.flop_utilization;
  if (key === "data") return r.data_wait_share === undefined ? null : r.data_wait_share;
  var v = r[key];
  return v === undefined ? null : v;
}
function rowText(r) {
  return [r.name, r.time, r.command, r.sources, r.state, r.error, sortValue(r, "bottleneck"), sortValue(r, "cp")].join(" ").toLowerCase();
}

function header() {
  var tr = el("tr");
  COLUMNS.forEach(function (c) {
    var th = el("th", {"data-col": c.key}, c.label);
    if (c.wide) th.className = "wide";
    if (state.sort.key === c.key) th.dataset.dir = state.sort.dir;
    if (c.sort !== false) th.addEventListener("click", function () {
      state.sort = {key: c.key, dir: state.sort.key === c.key && state.sort.dir === "asc" ? "desc" : "asc"};
      render();
    });
    tr.appendChild(th);
  });
  return tr;
}

function pickBox(r, side) {
  var box = el("input", {type: "checkbox", title: "compare: run " + side.toUpperCase(), "data-pick": side});
  box.checked = state[side] === r.name;
  box.disabled = r.state !== "ok";
  box.addEventListener("change", function () { state[side] = box.checked ? r.name : null; render(); });
  var label = el("label", {}, side.toUpperCase() + " ");
  label.appendChild(box);
  return label;
}

function runRow(r) {
  var tr = el("tr", {"data-run": r.name});
  tr.className = r.state + (state.a === r.name || state.b === r.name ? " sel" : "");
  COLUMNS.forEach(function (c) {
    var td = el("td");
    if (c.wide) td.className = "wide";
    if (c.num) td.className += " n";
    if (c.key === "pick" || c.key === "time" || c.key === "actions") td.className += " " + c.key;
    if (c.key === "pick") { td.appendChild(pickBox(r, "a")); td.appendChild(pickBox(r, "b")); }
    else if (c.key === "name") { td.textContent = r.name; td.title = r.path || ""; }
    else if (c.key === "time") td.textContent = (r.time || "").replace("T", " ").replace("+00:00", " UTC");
    else if (c.key === "command") { td.className += " cmd"; td.textContent = r.command || "—"; }
    else if (c.key === "step") {
      td.textContent = r.step_ns ? ms(r.step_ns.mean) : "—";
      if (r.step_ns) { td.title = "p50 " + ms(r.step_ns.p50) + " ms, p90 " + ms(r.step_ns.p90) + " ms"; td.dataset.v = r.step_ns.mean; }
    } else if (c.key === "bottleneck") {
      if (r.state === "error") { td.className += " err"; td.title = r.error;
        td.textContent = "error: " + (r.error.length > 140 ? r.error.slice(0, 139) + "…" : r.error); }
      else if (r.state === "pending") td.textContent = "summarising…";
      else td.textContent = r.bottleneck ? r.bottleneck.state + " " + pct(r.bottleneck.share) + " of " + (r.breakdown ? r.breakdown.scope : "") + " time" : "—";
    } else if (c.key === "cp") td.textContent = r.cp_top ? r.cp_top.category + " " + pct(r.cp_top.share) : "—";
    else if (c.key === "memory") {
      td.textContent = r.memory_peak_bytes === null || r.memory_peak_bytes === undefined ? "—" : (r.memory_peak_bytes / 1048576).toFixed(1);
      if (r.memory_peak_bytes !== null && r.memory_peak_bytes !== undefined) td.dataset.v = r.memory_peak_bytes;
    }
    else if (c.key === "mfu") {
      td.textContent = r.flop_utilization === null || r.flop_utilization === undefined ? "—" : (100 * r.flop_utilization).toFixed(1);
      if (r.flop_utilization !== null && r.flop_utilization !== undefined) td.dataset.v = r.flop_utilization;
    }
    else if (c.key === "data") {
      td.textContent = r.data_wait_share === null || r.data_wait_share === undefined ? "—" : (100 * r.data_wait_share).toFixed(1);
      if (r.data_wait_share !== null && r.data_wait_share !== undefined) td.dataset.v = r.data_wait_share;
    }
    else if (c.key === "actions") {
      var rep = el("button", {"data-action": "report"}, "Report");
      rep.addEventListener("click", function () { show("report?run=" + encodeURIComponent(r.name), "Report: " + r.name); });
      var pf = el("button", {"data-action": "perfetto"}, "Perfetto");
      pf.addEventListener("click", function () { perfetto(r, pf); });
      td.appendChild(rep); td.appendChild(document.createTextNode(" ")); td.appendChild(pf);
    } else {
      var v = r[c.key];
      td.textContent = v === null || v === undefined ? "—" : v;
    }
    tr.appendChild(td);
  });
  return tr;
}

function sorted(runs) {
  var k = state.sort.key, sign = state.sort.dir === "asc" ? 1 : -1;
  return runs.slice().sort(function (x, y) {
    var a = sortValue(x, k), b = sortValue(y, k);
    if (a === null && b === null) return x.name < y.name ? -1 : 1;
    if (a === null) return 1;
    if (b === null) return -1;
    var d = (typeof a === "number" && typeof b === "number") ? a - b : String(a).localeCompare(String(b));
    return sign * d || (x.name < y.name ? -1 : 1);
  });
}

function render() {
  var q = document.getElementById("filter").value.trim().toLowerCase();
  var runs = sorted(state.runs).filter(function (r) { return !q || rowText(r).indexOf(q) >= 0; });
  var table = document.getElementById("runs");
  var thead = el("thead"), tbody = el("tbody");
  thead.appendChild(header());
  runs.forEach(function (r) { tbody.appendChild(runRow(r)); });
  table.replaceChildren(thead, tbody);
  var bad = state.runs.filter(function (r) { return r.state === "error"; }).length;
  var pending = state.runs.filter(function (r) { return r.state === "pending"; }).length;
  document.getElementById("count").textContent = runs.length + " of " + state.runs.length + " runs shown" +
    (pending ? ", " + pending + " being summarised" : "") + (bad ? ", " + bad + " unreadable" : "");
  var cmp = document.getElementById("compare");
  cmp.disabled = !(state.a && state.b);
  cmp.textContent = state.a && state.b ? "Compare " + state.a + " → " + state.b : "Compare (tick A and B)";
  trends(runs);
}

function svg(tag, attrs) {
  var e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  return e;
}

function trends(runs) {
  var ok = runs.filter(function (r) { return r.state === "ok"; }).sort(function (x, y) { return (x.time || "").localeCompare(y.time || "") || (x.name < y.name ? -1 : 1); });
  var box = document.getElementById("trend-step");
  box.replaceChildren();
  var pts = ok.filter(function (r) { return r.step_ns; });
  var W = 560, H = 220, L = 56, B = 28, T = 10, R = 10;
  var s = svg("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "mean step time across runs", "data-plot": "step"});
  var max = Math.max.apply(null, pts.map(function (r) { return r.step_ns.mean; }).concat([1]));
  s.appendChild(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#889"}));
  s.appendChild(svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#889"}));
  [0, 0.5, 1].forEach(function (f) {
    var y = H - B - f * (H - B - T), t = svg("text", {x: L - 4, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#556"});
    t.textContent = (f * max / 1e6).toFixed(f ? 2 : 0); s.appendChild(t);
  });
  var yl = svg("text", {x: 12, y: T + (H - B - T) / 2, "font-size": 10, fill: "#556", transform: "rotate(-90 12 " + (T + (H - B - T) / 2) + ")", "text-anchor": "middle"});
  yl.textContent = "mean step (ms)"; s.appendChild(yl);
  var step = pts.length > 1 ? (W - L - R - 20) / (pts.length - 1) : 0, path = "";
  pts.forEach(function (r, i) {
    var x = L + 10 + i * step, y = H - B - (r.step_ns.mean / max) * (H - B - T);
    path += (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
    var c = svg("circle", {cx: x, cy: y, r: 3.5, fill: "#5c6bc0", "data-run": r.name});
    var tip = svg("title"); tip.textContent = r.name + ": " + ms(r.step_ns.mean) + " ms"; c.appendChild(tip);
    s.appendChild(c);
  });
  if (pts.length > 1) s.insertBefore(svg("path", {d: path, fill: "none", stroke: "#9fa8da", "stroke-width": 1.5}), s.firstChild);
  var xl = svg("text", {x: (L + W) / 2, y: H - 8, "font-size": 10, fill: "#556", "text-anchor": "middle"});
  xl.textContent = pts.length ? "runs in time order (" + pts.length + ")" : "no run with steps yet"; s.appendChild(xl);
  box.appendChild(s);

  var bbox = document.getElementById("trend-breakdown");
  bbox.replaceChildren();
  var rows = ok.filter(function (r) { return r.breakdown && r.breakdown.span_ns; });
  var rowH = 16, BH = Math.max(40, rows.length * rowH + 24), LW = 150;
  var b = svg("svg", {viewBox: "0 0 " + W + " " + BH, role: "img", "aria-label": "breakdown per run", "data-plot": "breakdown"});
  rows.forEach(function (r, i) {
    var y = 4 + i * rowH, x = LW, span = r.breakdown.span_ns;
    var name = svg("text", {x: LW - 6, y: y + 11, "text-anchor": "end", "font-size": 10, fill: "#334"});
    name.textContent = r.name.length > 24 ? r.name.slice(0, 23) + "…" : r.name; b.appendChild(name);
    STATES.forEach(function (st) {
      var t = r.breakdown.states[st] || 0; if (!t) return;
      var w = (t / span) * (W - LW - R);
      var rect = svg("rect", {x: x, y: y, width: Math.max(w, 0.5), height: rowH - 4, fill: COLORS[st]});
      var tip = svg("title"); tip.textContent = r.name + ": " + st + " " + pct(t / span) + " (" + ms(t) + " ms, " + r.breakdown.scope + ")";
      rect.appendChild(tip); b.appendChild(rect); x += w;
    });
  });
  if (!rows.length) { var none = svg("text", {x: 10, y: 24, "font-size": 11, fill: "#556"}); none.textContent = "no breakdown yet"; b.appendChild(none); }
  bbox.appendChild(b);
  var leg = document.getElementById("legend");
  leg.replaceChildren();
  STATES.forEach(function (st) { var sp = el("span"); var i = el("i"); i.style.background = COLORS[st]; sp.appendChild(i); sp.appendChild(document.createTextNode(st === "untraced" ? "outside traced calls" : st)); leg.appendChild(sp); });
}

function show(url, title) {
  var v = document.getElementById("viewer");
  v.hidden = false;
  document.getElementById("viewer-title").textContent = title;
  var link = document.getElementById("viewer-link");
  link.href = url;
  document.getElementById("frame").src = url;
  v.scrollIntoView({behavior: "smooth", block: "start"});
}

function perfetto(r, button) {
  var msg = document.getElementById("message");
  button.disabled = true;
  msg.textContent = "converting " + r.name + " for Perfetto…";
  fetch("api/perfetto?run=" + encodeURIComponent(r.name), {method: "POST"}).then(function (res) { return res.json(); }).then(function (doc) {
    button.disabled = false;
    msg.replaceChildren();
    if (doc.url) {
      msg.appendChild(document.createTextNode(r.name + " is served for the Perfetto UI until it has fetched it: "));
      var a = el("a", {href: doc.url, target: "_blank", rel: "noopener"}, "open in Perfetto");
      msg.appendChild(a);
      window.open(doc.url, "_blank", "noopener");
    } else {
      msg.appendChild(el("span", {"class": "err"}, (doc.error || "failed") + (doc.command ? " — in a shell: " : "")));
      if (doc.command) msg.appendChild(el("code", {}, doc.command));
    }
  }).catch(function (e) { button.disabled = false; msg.textContent = "Perfetto: " + e; });
}

function load() {
  return fetch("api/runs", {cache: "no-store"}).then(function (res) { return res.json(); }).then(function (doc) {
    state.runs = doc.runs;
    var names = doc.runs.map(function (r) { return r.name; });
    if (state.a && names.indexOf(state.a) < 0) state.a = null;
    if (state.b && names.indexOf(state.b) < 0) state.b = null;
    document.getElementById("folder").textContent = doc.folder;
    var p = document.getElementById("plugins");
    p.textContent = (doc.plugins.length ? "Report panels from plugins: " + doc.plugins.join(", ") + "." : "No report-panel plugins installed.") +
      (doc.plugin_problems.length ? " " + doc.plugin_problems.join("; ") : "");
    render();
    clearTimeout(state.timer);
    state.timer = setTimeout(load, doc.pending ? 1500 : 5000);
  }).catch(function (e) {
    document.getElementById("count").textContent = "the dashboard server does not answer (" + e + "); retrying";
    clearTimeout(state.timer);
    state.timer = setTimeout(load, 5000);
  });
}

document.getElementById("filter").addEventListener("input", render);
document.getElementById("rescan").addEventListener("click", load);
document.getElementById("compare").addEventListener("click", function () {
  if (state.a && state.b) show("diff?a=" + encodeURIComponent(state.a) + "&b=" + encodeURIComponent(state.b), "Diff: " + state.a + " → " + state.b);
});
document.getElementById("close").addEventListener("click", function () { document.getElementById("viewer").hidden = true; document.getElementById("frame").src = "about:blank"; });
load();
"""

BODY = """
<header><h1>di dashboard</h1><p id="folder"></p></header>
<main>
<section id="runs-section"><h2>Runs</h2>
<div class="bar"><input type="search" id="filter" placeholder="filter: name, command, bottleneck, error…" aria-label="filter runs">
<button id="rescan" type="button">Rescan</button><button id="compare" type="button" disabled>Compare (tick A and B)</button></div>
<p class="note" id="count">loading…</p><p class="note" id="message"></p>
<div class="scroll"><table id="runs"></table></div>
<p class="note">Step time: mean wall time of a step (first rank's start to last rank's end); p50/p90 in the tooltip.
Largest bottleneck: the biggest state of the GPUs' breakdown (the hosts' when there is no GPU) other than idle, as a share of their time.
<span id="plugins"></span></p></section>
<section id="trends"><h2>Trends</h2><div class="trends"><div><h3 class="note">Mean step time</h3><div id="trend-step"></div></div>
<div><h3 class="note">Breakdown (share of time per state)</h3><div id="trend-breakdown"></div><div class="legend" id="legend"></div></div></div></section>
<section id="viewer" hidden><div class="bar"><h2 id="viewer-title"></h2><a id="viewer-link" target="_blank" rel="noopener">open in a new tab</a>
<button id="close" type="button">Close</button></div><iframe id="frame" title="report or diff" src="about:blank"></iframe></section>
</main>
"""

PAGE = (
    '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
    f"<title>di dashboard</title><style>{CSS}</style></head><body>{BODY}<script>{JS}</script></body></html>"
)
