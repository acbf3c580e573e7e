/**
 * The status page for people: `GET /` serves one self-contained HTML page (inline
 * CSS and JS, no external assets; its Content-Security-Policy forbids any) that polls
 * `GET /status.json` every second and shows connections, publish outcomes per second
 * (computed in the browser from counter deltas), the retained set's topics and bytes, reader lag
 * per triple and the loaded topic map with per-rule hit counts.
 *
 * `statusJson()` is a plain function of a {@link StatusSource}, which the `Gateway` satisfies
 * structurally, so it is tested without sockets.
 *
 * @module
 */
import type { UplinkFields } from "../observe/uplink.ts";
import { type WallClock, wallClock } from "../base/wall_clock.ts";

/** A counter as the page reads it (`src/observe/metrics.ts` `Counter` fits). */
export interface CounterReading {
  get(labels?: Readonly<Record<string, string>>): number;
  readonly values: ReadonlyMap<string, number>;
}

/** One shared reader as `Delivery.readerStats()` reports it. */
export interface ReaderReading {
  readonly triple: { readonly stream: string; readonly topic: string; readonly partition: number };
  /** Next offset to poll. */
  readonly position: number;
  /** Last stored consumer offset (-1 = none). */
  readonly committed: number;
  /** Polled messages not yet settled (ack ledger entries). */
  readonly unsettled: number;
  readonly subscribers: number;
}

/** Resend counts of an Iggy backend (`ResendCounters` of the backend port). */
interface ResendReading {
  readonly resends: number;
  readonly foundStored?: number;
  readonly renewals: number;
  readonly possibleDuplicates: number;
}

/** What the status page shows; the `Gateway` has all of it. */
export interface StatusSource {
  readonly config: { readonly gateway: { readonly id: string; readonly backend: string } };
  readonly registry: { readonly size: number };
  readonly metrics: {
    /** label outcome = appended | acked | rejected | denied | failed */
    readonly publishes: CounterReading;
    /** label rule = 1-based rule index, or "default" */
    readonly ruleHits: CounterReading;
    readonly delivered: CounterReading;
    readonly droppedQos0: CounterReading;
    readonly evictions: CounterReading;
    readonly authFailures: CounterReading;
    readonly connectionsAccepted: CounterReading;
  };
  readonly delivery: {
    readerStats(): readonly ReaderReading[];
    /** Share groups with members connected (`delivery/share/stats.ts`). */
    shareStats?(): readonly ShareReading[];
    readonly parkedShareGroups?: number;
  };
  /** The retained set: topics and bytes (topic + headers + payload). */
  readonly retained?: { readonly set: { readonly size: number; readonly bytes: number } };
  /** The uplink (forward mode's upstream, or Iggy in Iggy mode); null for a plain embedded log. */
  readonly uplink?: { fields(now?: number): UplinkFields } | null;
  /** Iggy resend counts, when the backend keeps them. */
  readonly backend?: { readonly remote?: { resendCounters(): ResendReading } };
  readonly maps: {
    readonly current: {
      readonly source: string;
      readonly defaultStream: string;
      readonly defaultTopic: string;
      readonly rules: readonly {
        readonly index: number;
        readonly pattern: string;
        readonly stream: string;
        readonly topic: string;
        readonly partitionKey: string | null;
      }[];
    };
  };
  readiness(): {
    readonly ready: boolean;
    readonly reasons: readonly string[];
    readonly warnings: readonly string[];
    readonly backend?: string;
  };
}

/** One share group as `Delivery.shareStats()` reports it. */
export interface ShareReading {
  readonly group: string;
  readonly members: number;
  readonly lag: number;
  readonly partitions: number | null;
}

/** Share groups listed on the page at most (the most lagging first); the counts cover all. */
const SHARE_GROUPS_LISTED = 100;

/** The share groups' part of `/status.json`. */
function sharesJson(g: StatusSource) {
  const groups = [...(g.delivery.shareStats?.() ?? [])].sort((x, y) => y.lag - x.lag);
  return {
    connected: groups.length,
    parked: g.delivery.parkedShareGroups ?? 0,
    members: groups.reduce((n, x) => n + x.members, 0),
    lag: groups.reduce((n, x) => n + x.lag, 0),
    groups: groups.slice(0, SHARE_GROUPS_LISTED),
  };
}

/** Publish outcomes, exactly as docs/ARCHITECTURE.md names them. */
export const OUTCOMES = ["appended", "acked", "rejected", "denied", "failed"] as const;

function sum(c: CounterReading): number {
  let n = 0;
  for (const v of c.values.values()) n += v;
  return n;
}

/** Steps of the wall clock since start, and the last one (null when none). */
export function clockJson(clock: Pick<WallClock, "jumps" | "lastJump">): unknown {
  const j = clock.lastJump;
  const last = j === null ? null : {
    at: new Date(j.atMs).toISOString(),
    direction: j.stepMs > 0 ? "forward" : "backward",
    step_s: Math.round(Math.abs(j.stepMs) / 1000),
  };
  return { jumps: clock.jumps, last_jump: last };
}

/** The figures behind `/status.json`: counters are totals; the page computes rates. */
export function statusJson(g: StatusSource, now: number = Date.now()): unknown {
  const m = g.metrics;
  const map = g.maps.current;
  const readiness = g.readiness();
  return {
    gateway: {
      id: g.config.gateway.id,
      backend: g.config.gateway.backend,
      ...(readiness.backend ? { backend_detail: readiness.backend } : {}),
    },
    ...(g.uplink ? { uplink: g.uplink.fields(now) } : {}),
    time_ms: now,
    clock: clockJson(wallClock),
    ready: readiness.ready,
    not_ready_reasons: [...readiness.reasons],
    warnings: [...readiness.warnings],
    connections: g.registry.size,
    connections_accepted_total: sum(m.connectionsAccepted),
    auth_failures_total: sum(m.authFailures),
    publishes_total: Object.fromEntries(OUTCOMES.map((o) => [o, m.publishes.get({ outcome: o })])),
    deliveries_total: sum(m.delivered),
    deliveries_dropped_total: sum(m.droppedQos0),
    evictions_total: sum(m.evictions),
    ...(g.retained
      ? { retained: { topics: g.retained.set.size, bytes: g.retained.set.bytes } }
      : {}),
    ...resendsJson(g.backend?.remote?.resendCounters()),
    share_groups: sharesJson(g),
    readers: g.delivery.readerStats().map((s) => ({
      stream: s.triple.stream,
      topic: s.triple.topic,
      partition: s.triple.partition,
      position: s.position,
      committed: s.committed,
      // Same figure as the reader_lag_messages gauge: polled but not yet stored.
      lag: Math.max(0, s.position - 1 - s.committed),
      unsettled: s.unsettled,
      subscribers: s.subscribers,
    })),
    topic_map: {
      source: map.source,
      default_stream: map.defaultStream,
      default_topic: map.defaultTopic,
      default_hits: m.ruleHits.get({ rule: "default" }),
      rules: map.rules.map((r) => ({
        index: r.index,
        pattern: r.pattern,
        stream: r.stream,
        topic: r.topic,
        partition_key: r.partitionKey,
        hits: m.ruleHits.get({ rule: String(r.index) }),
      })),
    },
  };
}

/** `iggy_sends` of status.json: resends, cut sends found stored (0.11), renewals (0.12), possible duplicates (0.11). */
function resendsJson(c: ResendReading | undefined) {
  if (!c) return {};
  return {
    iggy_sends: {
      resent_total: c.resends,
      found_stored_total: c.foundStored ?? 0,
      producer_renewals_total: c.renewals,
      possible_duplicates_total: c.possibleDuplicates,
    },
  };
}

/** No external assets, no frames, no form posts: only same-origin fetches of status.json. */
const CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; " +
  "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; " +
  "frame-ancestors 'none'";

/**
 * Serves `/` (the page) and `/status.json`; `null` for any other path, so it plugs into the
 * `extra` hook of `serveHttp`.
 */
export function handleStatusRoute(url: URL, g: StatusSource): Response | null {
  if (url.pathname === "/" || url.pathname === "/status") {
    return new Response(renderStatusPage(), {
      headers: {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-store",
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
      },
    });
  }
  if (url.pathname === "/status.json") {
    return new Response(JSON.stringify(statusJson(g)) + "\n", {
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });
  }
  return null;
}

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
  --line:#dde1e7; --ok:#17803d; --bad:#b42318; --warn:#b54708; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6e9ef; --muted:#9aa4b5; --bg:#14171c;
  --card:#1c2027; --line:#2c323c; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: baseline; padding: .8rem 1.2rem;
  border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 1.15rem; margin: 0; }
#state { font-weight: 600; } .ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.warn { color: var(--warn); }
main { padding: 1rem 1.2rem; display: grid; gap: 1rem; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: .7rem; }
.tile { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .6rem .8rem; }
.tile .v { font-size: 1.6rem; font-weight: 650; font-variant-numeric: tabular-nums; }
.tile .l { color: var(--muted); font-size: .85rem; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .6rem .8rem; overflow-x: auto; }
section h2 { font-size: 1rem; margin: .2rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .25rem .6rem .25rem 0; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; font-size: .85rem; }
td.n, th.n { text-align: right; }
code { font: .9em ui-monospace, monospace; }
.muted { color: var(--muted); }
.banner { border: 2px solid; border-radius: 8px; padding: .6rem .8rem; font-weight: 650;
  background: var(--card); }
</style>
</head>
<body>
<header><h1>Iggy MQTT Gateway</h1><span id="gw" class="muted">loading…</span>
<span id="state">…</span><span id="updated" class="muted"></span></header>
<main>
<div id="uplink" class="banner" hidden></div>
<div id="clock" class="banner warn" hidden></div>
<div class="tiles">
<div class="tile"><div class="v" id="connections">–</div><div class="l">connections</div></div>
<div class="tile"><div class="v" id="rate-appended">–</div><div class="l">appended/s (QoS 0)</div></div>
<div class="tile"><div class="v" id="rate-acked">–</div><div class="l">acked/s (QoS 1)</div></div>
<div class="tile"><div class="v" id="rate-rejected">–</div><div class="l">rejected/s</div></div>
<div class="tile"><div class="v" id="rate-denied">–</div><div class="l">denied/s</div></div>
<div class="tile"><div class="v" id="rate-failed">–</div><div class="l">failed/s</div></div>
<div class="tile"><div class="v" id="rate-deliveries">–</div><div class="l">deliveries/s</div></div>
<div class="tile"><div class="v" id="retained-topics">–</div><div class="l">retained topics</div></div>
<div class="tile"><div class="v" id="retained-bytes">–</div><div class="l">retained bytes</div></div>
<div class="tile"><div class="v" id="share-groups">–</div><div class="l">share groups (members)</div></div>
<div class="tile"><div class="v" id="share-lag">–</div><div class="l">share groups' lag</div></div>
</div>
<section><h2>Publishes since start</h2><table><thead><tr><th class="n">appended</th>
<th class="n">acked</th><th class="n">rejected</th><th class="n">denied</th><th class="n">failed</th>
<th class="n">deliveries</th><th class="n">dropped QoS 0</th><th class="n">evictions</th>
<th class="n">auth failures</th></tr></thead><tbody><tr id="totals"></tr></tbody></table></section>
<section><h2>Shared readers (lag per triple)</h2><table><thead><tr><th>stream</th><th>topic</th>
<th class="n">partition</th><th class="n">subscribers</th><th class="n">next offset</th>
<th class="n">stored offset</th><th class="n">lag</th><th class="n">unsettled</th></tr></thead>
<tbody id="readers"></tbody></table></section>
<section><h2>Topic map <span id="map-source" class="muted"></span></h2><table><thead><tr>
<th class="n">#</th><th>MQTT topic pattern</th><th>stream</th><th>topic</th><th>partition key</th>
<th class="n">hits</th></tr></thead><tbody id="rules"></tbody></table></section>
</main>
<script>
"use strict";
const OUTCOMES = ["appended", "acked", "rejected", "denied", "failed"];
let prev = null;
const $ = (id) => document.getElementById(id);
const fmt = (n) => Number.isFinite(n) ? n.toLocaleString("en-US") : "–";
const rate = (n) => Number.isFinite(n) ? (n < 10 ? n.toFixed(1) : fmt(Math.round(n))) : "–";
function row(cells) {
  const tr = document.createElement("tr");
  for (const [text, cls] of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.append(td);
  }
  return tr;
}
function render(s) {
  $("gw").textContent = s.gateway.id + " · " + s.gateway.backend + " backend" +
    (s.gateway.backend_detail ? " (" + s.gateway.backend_detail + ")" : "");
  const warned = s.warnings.length > 0 ? " · warning: " + s.warnings.join("; ") : "";
  const uplinkDown = s.uplink !== undefined && !s.uplink.up;
  $("state").textContent = (s.ready ? "ready" : "not ready: " + s.not_ready_reasons.join("; ")) +
    (uplinkDown ? " · uplink down" : "") + warned;
  $("state").className = s.ready ? (warned || uplinkDown ? "warn" : "ok") : "bad";
  renderUplink(s.uplink);
  renderClock(s.clock);
  $("updated").textContent = "updated " + new Date(s.time_ms).toLocaleTimeString();
  $("connections").textContent = fmt(s.connections);
  $("retained-topics").textContent = fmt(s.retained?.topics);
  $("retained-bytes").textContent = fmt(s.retained?.bytes);
  const sg = s.share_groups;
  $("share-groups").textContent = fmt(sg.connected) + " (" + fmt(sg.members) + ")" +
    (sg.parked > 0 ? " +" + fmt(sg.parked) + " parked" : "");
  $("share-lag").textContent = fmt(sg.lag);
  const dt = prev ? (s.time_ms - prev.time_ms) / 1000 : 0;
  for (const o of OUTCOMES) {
    const v = dt > 0 ? (s.publishes_total[o] - prev.publishes_total[o]) / dt : NaN;
    $("rate-" + o).textContent = rate(v);
  }
  $("rate-deliveries").textContent =
    rate(dt > 0 ? (s.deliveries_total - prev.deliveries_total) / dt : NaN);
  const t = s.publishes_total;
  $("totals").replaceChildren(...row([[fmt(t.appended), "n"], [fmt(t.acked), "n"],
    [fmt(t.rejected), "n"], [fmt(t.denied), "n"], [fmt(t.failed), "n"],
    [fmt(s.deliveries_total), "n"], [fmt(s.deliveries_dropped_total), "n"],
    [fmt(s.evictions_total), "n"], [fmt(s.auth_failures_total), "n"]]).children);
  const readers = s.readers.map((r) => row([[r.stream], [r.topic], [String(r.partition), "n"],
    [fmt(r.subscribers), "n"], [fmt(r.position), "n"],
    [r.committed < 0 ? "none" : fmt(r.committed), "n"],
    [fmt(r.lag), "n" + (r.lag > 0 ? " warn" : "")], [fmt(r.unsettled), "n"]]));
  if (readers.length === 0) readers.push(row([["no subscriptions yet", "muted"]]));
  $("readers").replaceChildren(...readers);
  const m = s.topic_map;
  $("map-source").textContent = "(" + m.source + ")";
  const rules = m.rules.map((r) => row([[String(r.index), "n"], [r.pattern], [r.stream],
    [r.topic], [r.partition_key === null ? "(balanced)" : r.partition_key], [fmt(r.hits), "n"]]));
  rules.push(row([["–", "n"], ["(no rule matched: default)", "muted"], [m.default_stream],
    [m.default_topic], ["(balanced)"], [fmt(m.default_hits), "n"]]));
  $("rules").replaceChildren(...rules);
  prev = s;
}
function renderUplink(u) {
  $("uplink").hidden = !u;
  if (!u) return;
  const since = new Date(u.since_ms).toLocaleTimeString();
  const waiting = fmt(u.waiting_messages) + " messages, " + fmt(u.waiting_bytes) + " bytes waiting" +
    (u.waiting_messages > 0 ? ", oldest " + u.oldest_age_s.toFixed(1) + " s" : "");
  const drain = u.draining || u.drain_rate > 0 ? " · sending " + rate(u.drain_rate) + " msg/s" : "";
  $("uplink").textContent = (u.up ? "Uplink up since " + since
    : "Uplink DOWN since " + since + ": " + u.reason) + " · " + waiting + drain;
  $("uplink").className = "banner " + (u.up ? (u.draining ? "warn" : "ok") : "bad");
}
function renderClock(c) {
  const j = c && c.last_jump;
  $("clock").hidden = !j;
  if (!j) return;
  $("clock").textContent = "Wall clock jumped " + j.direction + " by " + fmt(j.step_s) + " s at " +
    j.at + " (" + fmt(c.jumps) + " since start): ages count the time that actually passed";
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
