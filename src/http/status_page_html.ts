/**
 * The status page's HTML, CSS and script, as one string (no external asset: edge boxes are
 * offline). Everything it shows comes from `/status.json`; charts are inline SVG drawn by the
 * script from the history ring's series. Plain words on the page, the design's words in a
 * tooltip (`title`) where they differ.
 *
 * @module
 */

/** The page: small, self-contained, readable without JS frameworks or network assets. */
export function renderStatusPage(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Iggy MQTT Gateway — status</title>
<style>
:root { color-scheme: light dark; --fg:#1d2430; --muted:#5b6678; --bg:#f6f7f9; --card:#fff;
  --line:#dde1e7; --ok:#17803d; --bad:#b42318; --warn:#b54708; --okbg:#e7f6ec; --badbg:#fdecea;
  --warnbg:#fff4e5; --c1:#2f6fdf; --c2:#17803d; --c3:#b54708; --c4:#b42318; --c5:#7a4cc2; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6e9ef; --muted:#9aa4b5; --bg:#14171c;
  --card:#1c2027; --line:#2c323c; --okbg:#15301f; --badbg:#3a1a17; --warnbg:#3a2a12; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: .4rem 1rem; align-items: baseline; padding: .7rem 1.2rem;
  border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 1.15rem; margin: 0; }
#state { font-weight: 700; padding: .1rem .6rem; border-radius: 1rem; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
#state.ok { background: var(--okbg); } #state.bad { background: var(--badbg); }
#state.warn { background: var(--warnbg); }
main { padding: 1rem 1.2rem; display: grid; gap: .9rem; }
.row { display: grid; grid-template-columns: repeat(auto-fit, minmax(270px, 1fr)); gap: .9rem; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: .6rem; }
.tile, section, .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .55rem .8rem; }
.tile .v { font-size: 1.5rem; font-weight: 650; font-variant-numeric: tabular-nums; }
.tile .l, .muted { color: var(--muted); } .tile .l { font-size: .82rem; }
.card h2, section h2 { font-size: .95rem; margin: .1rem 0 .4rem; }
.card .big { font-size: 1.25rem; font-weight: 700; }
.card.is-ok, .banner.ok { border-left: 6px solid var(--ok); }
.card.is-bad, .banner.bad { border: 2px solid var(--bad); border-left-width: 6px; background: var(--badbg); }
.card.is-warn, .banner.warn { border-left: 6px solid var(--warn); background: var(--warnbg); }
.is-ok .big { color: var(--ok); } .is-bad .big { color: var(--bad); } .is-warn .big { color: var(--warn); }
.banner { border-radius: 8px; padding: .6rem .8rem; font-weight: 650; background: var(--card);
  border: 1px solid var(--line); }
.bar { height: 14px; border-radius: 7px; background: var(--line); overflow: hidden; margin: .3rem 0; }
.bar > div { height: 100%; background: var(--ok); }
.bar.warn > div { background: var(--warn); } .bar.bad > div { background: var(--bad); }
section { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .2rem .6rem .2rem 0; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: .82rem; }
th.sort { cursor: pointer; } th.sort:hover { color: var(--fg); }
td.n, th.n { text-align: right; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(330px, 1fr)); gap: .9rem; }
.chart svg { width: 100%; height: 110px; display: block; }
.chart .legend span { margin-right: .7rem; font-size: .8rem; }
.chart .legend i { display: inline-block; width: .7rem; height: .25rem; vertical-align: middle;
  margin-right: .25rem; }
th[title], h2[title], .l[title], #store-note { text-decoration: underline dotted var(--muted);
  text-underline-offset: 3px; }
</style>
</head>
<body>
<header><h1>Iggy MQTT Gateway</h1><span id="gw" class="muted">loading…</span>
<span id="state">…</span><span id="version" class="muted"></span><span id="uptime" class="muted"></span>
<span id="updated" class="muted"></span></header>
<main>
<div id="uplink" class="banner" hidden></div>
<div id="clock" class="banner warn" hidden title="wall-clock step: ages and expiries count elapsed time, not the wall clock"></div>
<div class="row">
<div id="health-card" class="card"><h2>Gateway</h2><div id="health" class="big">…</div>
<div id="reasons" class="bad"></div><div id="warnings" class="warn"></div><div id="listeners" class="muted"></div></div>
<div id="store-card" class="card" hidden><h2 title="embedded.max_store_bytes">Local store</h2>
<div id="store-fill" class="big"></div><div id="store-bar" class="bar"><div></div></div>
<div id="store-note" class="muted"></div><table><tbody id="store-topics"></tbody></table></div>
<div class="card"><h2>Connections</h2><div class="big"><span id="connections">–</span> connected</div>
<div id="by-listener" class="muted"></div>
<div id="sessions-line" class="muted" title="stored sessions"></div></div>
</div>
<div class="tiles">
<div class="tile"><div class="v" id="rate-appended">–</div><div class="l" title="appended">stored/s (QoS 0)</div></div>
<div class="tile"><div class="v" id="rate-acked">–</div><div class="l" title="acked">stored and confirmed/s (QoS 1, 2)</div></div>
<div class="tile"><div class="v" id="rate-rejected">–</div><div class="l" title="rejected">malformed/s</div></div>
<div class="tile"><div class="v" id="rate-denied">–</div><div class="l" title="denied">not allowed/s</div></div>
<div class="tile"><div class="v" id="rate-failed">–</div><div class="l" title="failed">could not be stored/s</div></div>
<div class="tile"><div class="v" id="rate-deliveries">–</div><div class="l" title="deliveries">sent to subscribers/s</div></div>
<div class="tile"><div class="v" id="retained-topics">–</div><div class="l">retained topics</div></div>
<div class="tile"><div class="v" id="retained-bytes">–</div><div class="l">retained bytes</div></div>
<div class="tile"><div class="v" id="share-groups">–</div><div class="l" title="$share groups (members)">shared groups (members)</div></div>
<div class="tile"><div class="v" id="share-lag">–</div><div class="l" title="share groups' lag">shared groups behind</div></div>
</div>
<div class="charts" id="charts"></div>
<section><h2>Clients <span id="clients-note" class="muted"></span></h2><table><thead><tr id="clients-head"></tr></thead>
<tbody id="clients"></tbody></table></section>
<section><h2 title="stored sessions: clean session 0 / MQTT 5 session expiry">Sessions kept for offline clients <span id="sessions-note" class="muted"></span></h2>
<table><thead><tr><th>client id</th><th>state</th><th>removed at, if it stays away</th>
<th class="n">subscriptions</th></tr></thead><tbody id="sessions"></tbody></table></section>
<section><h2 title="shared readers: lag per triple">Subscribers reading the log</h2><table><thead><tr><th>stream</th><th>topic</th>
<th class="n">partition</th><th class="n">subscribers</th><th class="n" title="next offset">next message</th>
<th class="n" title="stored offset">last confirmed</th><th class="n" title="lag">behind</th>
<th class="n" title="unsettled (ack ledger)">sent, not yet confirmed</th></tr></thead>
<tbody id="readers"></tbody></table></section>
<section><h2 title="$share groups">Shared subscriptions</h2><table><thead><tr><th>group</th><th class="n">members</th>
<th class="n" title="lag">behind</th><th class="n">partitions</th></tr></thead><tbody id="shares"></tbody></table></section>
<section><h2>Since start</h2><table><thead><tr><th class="n" title="appended">stored (QoS 0)</th>
<th class="n" title="acked">stored and confirmed</th><th class="n" title="rejected">malformed</th>
<th class="n" title="denied">not allowed</th><th class="n" title="failed">could not be stored</th>
<th class="n">sent to subscribers</th><th class="n" title="deliveries dropped (QoS 0)">dropped (QoS 0)</th>
<th class="n" title="slow consumer evictions">slow clients closed</th><th class="n">failed logins</th></tr></thead>
<tbody><tr id="totals"></tr></tbody></table></section>
<section><h2>Topic map <span id="map-source" class="muted"></span></h2><table><thead><tr>
<th class="n">#</th><th>MQTT topic pattern</th><th>stream</th><th>topic</th><th>partition key</th>
<th class="n">hits</th></tr></thead><tbody id="rules"></tbody></table></section>
</main>
<script>
"use strict";
const OUTCOMES = ["appended", "acked", "rejected", "denied", "failed"];
const $ = (id) => document.getElementById(id);
const fmt = (n) => Number.isFinite(n) ? n.toLocaleString("en-US") : "–";
const rate = (n) => Number.isFinite(n) ? (n < 10 ? n.toFixed(1) : fmt(Math.round(n))) : "–";
const bytes = (n) => !Number.isFinite(n) ? "–" : n < 1024 ? n + " B" : n < 1048576 ?
  (n / 1024).toFixed(1) + " KiB" : n < 1073741824 ? (n / 1048576).toFixed(1) + " MiB" :
  (n / 1073741824).toFixed(2) + " GiB";
const ago = (s) => s < 60 ? Math.round(s) + " s" : s < 3600 ? Math.round(s / 60) + " min" :
  s < 172800 ? (s / 3600).toFixed(1) + " h" : Math.round(s / 86400) + " days";
const clock = (ms) => new Date(ms).toLocaleTimeString();
function row(cells) {
  const tr = document.createElement("tr");
  for (const [text, cls, title] of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (title) td.title = title;
    tr.append(td);
  }
  return tr;
}
function empty(text, span) {
  const tr = row([[text, "muted"]]);
  tr.firstChild.colSpan = span;
  return tr;
}
function render(s) {
  $("gw").textContent = s.gateway.id + " · " + s.gateway.backend + " backend" +
    (s.gateway.backend_detail ? " (" + s.gateway.backend_detail + ")" : "");
  const uplinkDown = s.uplink !== undefined && !s.uplink.up;
  const full = s.store && s.store.full;
  const warned = s.warnings.length > 0;
  $("state").textContent = s.ready ? "ready" + (uplinkDown ? " · uplink down" : "") +
    (warned ? " · warning" : "") : "not ready";
  $("state").className = s.ready ? (warned || uplinkDown ? "warn" : "ok") : "bad";
  $("version").textContent = s.version ? "v" + s.version : "";
  $("uptime").textContent = s.uptime_s !== undefined ? "up " + ago(s.uptime_s) : "";
  $("updated").textContent = "updated " + clock(s.time_ms);
  $("health").textContent = s.ready ? (full ? "Working, but the store is full" : "Working") :
    "NOT READY";
  $("reasons").textContent = s.not_ready_reasons.join("; ");
  $("health-card").className = "card is-" + (s.ready && !full ? (warned ? "warn" : "ok") : "bad");
  $("warnings").textContent = s.warnings.join("; ");
  $("listeners").textContent = (s.listeners || []).map((l) => l.name + " " + l.address).join(" · ");
  renderUplink(s.uplink);
  renderClock(s.clock);
  renderStore(s.store);
  $("connections").textContent = fmt(s.connections);
  if (s.clients) {
    $("by-listener").textContent = Object.entries(s.clients.by_listener)
      .map(([k, n]) => fmt(n) + " on " + k).join(" · ") || "no client connected";
  }
  const ss = s.stored_sessions;
  if (ss) $("sessions-line").textContent = fmt(ss.total) + " sessions kept (" + fmt(ss.offline) +
    " offline)";
  $("retained-topics").textContent = fmt(s.retained?.topics);
  $("retained-bytes").textContent = bytes(s.retained?.bytes);
  const sg = s.share_groups;
  $("share-groups").textContent = fmt(sg.connected) + " (" + fmt(sg.members) + ")" +
    (sg.parked > 0 ? " +" + fmt(sg.parked) + " parked" : "");
  $("share-lag").textContent = fmt(sg.lag);
  renderRates(s);
  renderTotals(s);
  if (s.history) renderCharts(s.history, s.uplink !== undefined);
  if (s.clients) renderClients(s.clients);
  if (ss) renderSessions(ss);
  renderReaders(s.readers);
  renderShares(sg.groups);
  renderMap(s.topic_map);
}
let prev = null;
function renderRates(s) {
  const r = s.rates;
  const dt = prev ? (s.time_ms - prev.time_ms) / 1000 : 0;
  for (const o of OUTCOMES) {
    const v = r ? r[o] : dt > 0 ? (s.publishes_total[o] - prev.publishes_total[o]) / dt : NaN;
    $("rate-" + o).textContent = rate(v);
    const alarm = o === "failed" ? "bad" : o === "rejected" || o === "denied" ? "warn" : "";
    $("rate-" + o).className = "v" + (v > 0 && alarm ? " " + alarm : "");
  }
  $("rate-deliveries").textContent = rate(r ? r.deliveries :
    dt > 0 ? (s.deliveries_total - prev.deliveries_total) / dt : NaN);
  prev = s;
}
function renderTotals(s) {
  const t = s.publishes_total;
  $("totals").replaceChildren(...row([[fmt(t.appended), "n"], [fmt(t.acked), "n"],
    [fmt(t.rejected), "n"], [fmt(t.denied), "n"], [fmt(t.failed), "n" + (t.failed > 0 ? " bad" : "")],
    [fmt(s.deliveries_total), "n"], [fmt(s.deliveries_dropped_total), "n"],
    [fmt(s.evictions_total), "n"], [fmt(s.auth_failures_total), "n"]]).children);
}
function renderUplink(u) {
  $("uplink").hidden = !u;
  if (!u) return;
  const since = clock(u.since_ms) + " (" + ago((Date.now() - u.since_ms) / 1000) + " ago)";
  const waiting = fmt(u.waiting_messages) + " messages (" + bytes(u.waiting_bytes) + ") waiting" +
    (u.waiting_messages > 0 ? ", oldest " + ago(u.oldest_age_s) : "");
  const drain = u.draining || u.drain_rate > 0 ? " · sending " + rate(u.drain_rate) + " msg/s" : "";
  $("uplink").textContent = (u.up ? "Uplink up since " + since
    : "Uplink DOWN since " + since + ": " + u.reason) + " · " + waiting + drain;
  $("uplink").className = "banner " + (u.up ? (u.draining ? "warn" : "ok") : "bad");
  $("uplink").title = "uplink: forward lag (forward_lag_messages, forward_lag_bytes)";
}
function renderClock(c) {
  const j = c && c.last_jump;
  $("clock").hidden = !j;
  if (!j) return;
  $("clock").textContent = "The wall clock jumped " + j.direction + " by " + ago(j.step_s) + " at " +
    j.at + " (" + fmt(c.jumps) + " since start): stored data is aged by the time that really passed";
}
function renderStore(st) {
  $("store-card").hidden = !st;
  if (!st) return;
  const pct = st.fill_percent;
  const level = st.full ? "bad" : pct >= 80 ? "warn" : "ok";
  $("store-card").className = "card is-" + level;
  $("store-fill").textContent = st.full ? "FULL: new messages are refused" :
    (pct === null ? "measuring…" : pct.toFixed(1) + " % full");
  $("store-bar").className = "bar " + level;
  $("store-bar").firstChild.style.width = Math.min(100, st.full ? 100 : pct || 0) + "%";
  $("store-note").textContent = bytes(st.records_bytes) + " of " + bytes(st.max_bytes) +
    " in " + fmt(st.topics) + " topics" + (st.scanned_in_part ? " (scanned in part)" : "");
  $("store-note").title = "records' bytes (payload and headers) against embedded.max_store_bytes";
  $("store-topics").replaceChildren(...st.largest_topics.map((t) =>
    row([[t.stream + " / " + t.topic], [fmt(t.messages) + " msgs", "n"], [bytes(t.bytes), "n"]])));
}
const CHARTS = [
  ["Messages in per second", "mqtt_publishes_total by outcome", (h) => [
    ["stored", "--c2", h.publishes.appended.map((v, i) => v + h.publishes.acked[i])],
    ["refused", "--c3", h.publishes.rejected.map((v, i) => v + h.publishes.denied[i])],
    ["failed", "--c4", h.publishes.failed]]],
  ["Messages out per second", "mqtt_deliveries_total", (h) => [["sent", "--c1", h.deliveries]]],
  ["Time to confirm a message (ms)", "mean PUBACK latency (mqtt_puback_latency_seconds)",
    (h) => [["PUBACK", "--c5", h.puback_ms]]],
  ["Waiting for the uplink (messages)", "forward lag (forward_lag_messages)",
    (h) => [["waiting", "--c3", h.forward_waiting]], "uplink"],
  ["Memory (MB)", "resident set size (RSS)", (h) => [["RSS", "--c1", h.rss_bytes.map((b) => b / 1048576)]]],
  ["CPU (% of one core)", "process CPU time, user and system", (h) => [["CPU", "--c2", h.cpu_percent]]],
];
function renderCharts(h, hasUplink) {
  const el = $("charts");
  el.replaceChildren(...CHARTS.filter((c) => c[3] !== "uplink" || hasUplink).map(([title, tip, pick]) => {
    const card = document.createElement("div");
    card.className = "card chart";
    const h2 = document.createElement("h2");
    h2.textContent = title;
    h2.title = tip;
    const lines = pick(h);
    const legend = document.createElement("div");
    legend.className = "legend";
    for (const [name, colour, values] of lines) {
      const last = values.length ? values[values.length - 1] : null;
      const span = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = "var(" + colour + ")";
      span.append(i, name + " " + (last === null ? "–" : rate(last)));
      legend.append(span);
    }
    card.append(h2, svgChart(lines, h.t.length, h.interval_ms), legend);
    return card;
  }));
}
const NS = "http://www.w3.org/2000/svg";
function svgChart(lines, n, intervalMs) {
  const W = 300, H = 100, svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + (H + 12));
  svg.setAttribute("preserveAspectRatio", "none");
  const slots = Math.round(900000 / intervalMs);
  let max = 0;
  for (const [, , v] of lines) for (const x of v) if (x !== null && x > max) max = x;
  const top = max > 0 ? max * 1.1 : 1;
  const grid = document.createElementNS(NS, "path");
  grid.setAttribute("d", "M0 " + H + " H" + W + " M0 " + H / 2 + " H" + W);
  grid.setAttribute("stroke", "var(--line)");
  svg.append(grid);
  for (const [, colour, values] of lines) {
    const pts = [];
    values.forEach((v, i) => { if (v !== null) pts.push(((slots - n + i + 1) / slots * W).toFixed(1) + "," + (H - v / top * H).toFixed(1)); });
    const pl = document.createElementNS(NS, "polyline");
    pl.setAttribute("points", pts.join(" "));
    pl.setAttribute("fill", "none");
    pl.setAttribute("stroke", "var(" + colour + ")");
    pl.setAttribute("stroke-width", "2");
    pl.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(pl);
  }
  for (const [x, anchor, text] of [[2, "start", "15 min ago"], [W - 2, "end", "now"], [2, "start", "max " + rate(max)]]) {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", x);
    t.setAttribute("y", text.startsWith("max") ? 9 : H + 11);
    t.setAttribute("text-anchor", anchor);
    t.setAttribute("font-size", "9");
    t.setAttribute("fill", "var(--muted)");
    t.textContent = text;
    svg.append(t);
  }
  return svg;
}
const CLIENT_COLS = [["client id", "client_id"], ["user", "user"], ["address", "address"],
  ["listener", "listener"], ["MQTT", "protocol"], ["connected since", "since_ms"],
  ["messages in", "messages_in", "n"], ["messages out", "messages_out", "n"],
  ["queued bytes", "queued_bytes", "n", "outbound queue"]];
let clientSort = ["since_ms", 1];
function renderClients(c) {
  const head = CLIENT_COLS.map(([label, key, cls, tip]) => {
    const th = document.createElement("th");
    th.textContent = label + (clientSort[0] === key ? (clientSort[1] > 0 ? " ▲" : " ▼") : "");
    th.className = "sort" + (cls ? " " + cls : "");
    if (tip) th.title = tip;
    th.onclick = () => { clientSort = [key, clientSort[0] === key ? -clientSort[1] : 1]; renderClients(c); };
    return th;
  });
  $("clients-head").replaceChildren(...head);
  const [key, dir] = clientSort;
  const rows = [...c.listed].sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0) * dir);
  $("clients-note").textContent = c.total > c.listed.length ?
    "(the " + c.listed.length + " longest connected of " + fmt(c.total) + ")" : "(" + fmt(c.total) + ")";
  const trs = rows.map((r) => row([[r.client_id], [r.user || "(anonymous)"], [r.address],
    [r.listener], [r.protocol], [clock(r.since_ms)], [fmt(r.messages_in), "n"],
    [fmt(r.messages_out), "n"], [fmt(r.queued_bytes), "n"]]));
  $("clients").replaceChildren(...(trs.length ? trs : [empty("no client connected", 9)]));
}
function renderSessions(ss) {
  $("sessions-note").textContent = "(" + fmt(ss.total) + ": " + fmt(ss.connected) + " connected, " +
    fmt(ss.offline) + " offline)";
  const trs = ss.listed.map((x) => row([[x.client_id], [x.connected ? "connected" : "offline",
    x.connected ? "ok" : "muted"], [x.expires_at_ms === null ? "–" : new Date(x.expires_at_ms).toLocaleString()],
    [fmt(x.subscriptions), "n"]]));
  $("sessions").replaceChildren(...(trs.length ? trs : [empty("no session kept", 4)]));
}
function renderReaders(readers) {
  const trs = readers.map((r) => row([[r.stream], [r.topic], [String(r.partition), "n"],
    [fmt(r.subscribers), "n"], [fmt(r.position), "n"],
    [r.committed < 0 ? "nothing yet" : fmt(r.committed), "n"],
    [fmt(r.lag), "n" + (r.lag > 0 ? " warn" : "")], [fmt(r.unsettled), "n"]]));
  $("readers").replaceChildren(...(trs.length ? trs :
    [empty("No subscriber is reading the log right now", 8)]));
}
function renderShares(groups) {
  const trs = groups.map((g) => row([[g.group], [fmt(g.members), "n"],
    [fmt(g.lag), "n" + (g.lag > 0 ? " warn" : "")], [g.partitions === null ? "–" : fmt(g.partitions), "n"]]));
  $("shares").replaceChildren(...(trs.length ? trs : [empty("no shared subscription", 4)]));
}
function renderMap(m) {
  $("map-source").textContent = "(" + m.source + ")";
  const rules = m.rules.map((r) => row([[String(r.index), "n"], [r.pattern], [r.stream],
    [r.topic], [r.partition_key === null ? "(balanced)" : r.partition_key], [fmt(r.hits), "n"]]));
  rules.push(row([["–", "n"], ["(no rule matched: default)", "muted"], [m.default_stream],
    [m.default_topic], ["(balanced)"], [fmt(m.default_hits), "n"]]));
  $("rules").replaceChildren(...rules);
}
async function poll() {
  try {
    const res = await fetch("status.json", { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    render(await res.json());
  } catch (err) {
    $("state").textContent = "unreachable: " + err.message;
    $("state").className = "bad";
  } finally {
    setTimeout(poll, 1000);
  }
}
poll();
</script>
</body>
</html>
`;
}
