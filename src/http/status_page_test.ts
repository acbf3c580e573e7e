import assert from "node:assert/strict";
import type { Gateway } from "../gateway.ts";
import { WallClock } from "../base/wall_clock.ts";
import { GatewayMetrics, sendHistograms, sendRetryGauge } from "../observe/gateway_metrics.ts";
import {
  clockJson,
  handleStatusRoute,
  renderStatusPage,
  statusJson,
  type StatusSource,
} from "./status_page.ts";

// Compile-time proof that the Gateway satisfies StatusSource, so wiring needs no adapter.
export function gatewayIsStatusSource(g: Gateway): StatusSource {
  return g;
}

function fakeSource(): StatusSource & { metrics: GatewayMetrics } {
  const metrics = new GatewayMetrics();
  return {
    config: { gateway: { id: "edge-7", backend: "embedded" } },
    registry: { size: 3 },
    metrics,
    delivery: {
      readerStats: () => [{
        triple: { stream: "sensors", topic: "sensor_data", partition: 2 },
        position: 11,
        committed: 4,
        unsettled: 6,
        subscribers: 2,
      }],
      shareStats: () => [
        { group: "workers/jobs/+", members: 2, lag: 1, partitions: null },
        { group: "audit/#", members: 1, lag: 7, partitions: 2 },
      ],
      parkedShareGroups: 1,
    },
    maps: {
      current: {
        source: "topic-map.toml",
        defaultStream: "sensors",
        defaultTopic: "messages_default",
        rules: [
          { index: 1, pattern: "a/([^/]+)", stream: "s_$1", topic: "t", partitionKey: null },
          { index: 2, pattern: "b/(\\d+)", stream: "s", topic: "t", partitionKey: "k_$1" },
        ],
      },
    },
    readiness: () => ({ ready: true, reasons: [], warnings: [] }),
  };
}

Deno.test("renderStatusPage() references no external URL or asset", () => {
  // The SVG namespace is a name (createElementNS), never fetched: the one URL-like text allowed.
  const svgNamespace = '"http://www.w3.org/2000/svg"';
  const page = renderStatusPage();
  assert.equal(page.split(svgNamespace).length, 2, "the SVG namespace, once");
  const html = page.replace(svgNamespace, '""');
  assert.doesNotMatch(html, /https?:/i);
  assert.doesNotMatch(html, /(src|href)\s*=/i);
  assert.doesNotMatch(html, /url\(|@import|<link|<img|<iframe|<object|<embed/i);
  assert.doesNotMatch(html, /["'(]\/\/[a-z0-9]/i, "no protocol-relative URLs");
  // The only fetch is the same-origin, relative status.json.
  assert.deepEqual([...html.matchAll(/fetch\("([^"]+)"/g)].map((m) => m[1]), ["status.json"]);
});

Deno.test("renderStatusPage() polls every second and its inline script parses", () => {
  const html = renderStatusPage();
  assert.match(html, /^<!doctype html>/);
  assert.match(html, /setTimeout\(poll, 1000\)/);
  const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
  assert.equal(scripts.length, 1);
  assert.doesNotThrow(() => new Function(scripts[0]));
});

Deno.test("statusJson() reports connections, outcome totals, share groups, readers and rule hits", () => {
  const g = fakeSource();
  g.metrics.publishes.inc({ outcome: "acked" }, 5);
  g.metrics.publishes.inc({ outcome: "denied" });
  g.metrics.ruleHits.inc({ rule: "2" }, 4);
  g.metrics.ruleHits.inc({ rule: "default" }, 2);
  g.metrics.delivered.inc({ qos: "0" }, 3);
  g.metrics.delivered.inc({ qos: "1" }, 4);
  g.metrics.authFailures.inc({ reason: "bad_password" });
  assert.deepEqual(statusJson(g, 1_700_000_000_000), {
    gateway: { id: "edge-7", backend: "embedded" },
    time_ms: 1_700_000_000_000,
    clock: { jumps: 0, last_jump: null },
    ready: true,
    not_ready_reasons: [],
    warnings: [],
    connections: 3,
    connections_accepted_total: 0,
    auth_failures_total: 1,
    publishes_total: { appended: 0, acked: 5, rejected: 0, denied: 1, failed: 0 },
    deliveries_total: 7,
    deliveries_dropped_total: 0,
    evictions_total: 0,
    share_groups: {
      connected: 2,
      parked: 1,
      members: 3,
      lag: 8,
      groups: [ // the most lagging first
        { group: "audit/#", members: 1, lag: 7, partitions: 2 },
        { group: "workers/jobs/+", members: 2, lag: 1, partitions: null },
      ],
    },
    readers: [{
      stream: "sensors",
      topic: "sensor_data",
      partition: 2,
      position: 11,
      committed: 4,
      lag: 6,
      unsettled: 6,
      subscribers: 2,
    }],
    topic_map: {
      source: "topic-map.toml",
      default_stream: "sensors",
      default_topic: "messages_default",
      default_hits: 2,
      rules: [
        {
          index: 1,
          pattern: "a/([^/]+)",
          stream: "s_$1",
          topic: "t",
          partition_key: null,
          hits: 0,
        },
        { index: 2, pattern: "b/(\\d+)", stream: "s", topic: "t", partition_key: "k_$1", hits: 4 },
      ],
    },
  });
});

Deno.test("statusJson() is JSON-serialisable and says why the gateway is not ready", () => {
  const g = {
    ...fakeSource(),
    readiness: () => ({
      ready: false,
      reasons: ["stopping"],
      warnings: ["PUBACK before disk on s/t"],
    }),
  };
  const s = JSON.parse(JSON.stringify(statusJson(g)));
  assert.equal(s.ready, false);
  assert.deepEqual(s.not_ready_reasons, ["stopping"]);
  assert.deepEqual(s.warnings, ["PUBACK before disk on s/t"]);
});

Deno.test("handleStatusRoute() serves the page and status.json with a strict CSP", async () => {
  const g = fakeSource();
  const page = handleStatusRoute(new URL("http://h/"), g)!;
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  assert.match(page.headers.get("content-security-policy")!, /default-src 'none'/);
  assert.match(page.headers.get("content-security-policy")!, /connect-src 'self'/);
  assert.equal(await page.text(), renderStatusPage());
  const json = handleStatusRoute(new URL("http://h/status.json"), g)!;
  assert.equal(json.headers.get("content-type"), "application/json");
  assert.equal((await json.json()).connections, 3);
});

Deno.test("handleStatusRoute() returns null for other paths (404 stays with the server)", () => {
  assert.equal(handleStatusRoute(new URL("http://h/nope"), fakeSource()), null);
});

Deno.test("statusJson() reports an Iggy backend's resends, renewals and possible duplicates", () => {
  const g = fakeSource();
  assert.equal((statusJson(g) as Record<string, unknown>).iggy_sends, undefined, "none kept");
  const counts = { resends: 2, foundStored: 4, renewals: 3, possibleDuplicates: 5 };
  const s = statusJson({ ...g, backend: { remote: { resendCounters: () => counts } } }) as {
    iggy_sends: unknown;
  };
  assert.deepEqual(s.iggy_sends, {
    resent_total: 2,
    found_stored_total: 4,
    producer_renewals_total: 3,
    possible_duplicates_total: 5,
  });
});

Deno.test("statusJson() carries the uplink as fields, and the page shows it as a banner, red while down", () => {
  const g = fakeSource();
  assert.equal((statusJson(g) as Record<string, unknown>).uplink, undefined, "no uplink");
  const fields = {
    up: false,
    since_ms: 1_700_000_000_000,
    reason: "Iggy at 10.0.0.5:8090 unreachable: connection refused",
    waiting_messages: 2_000,
    waiting_bytes: 3_600_000,
    oldest_age_s: 41.3,
    drain_rate: 0,
    draining: false,
  };
  const s = statusJson({ ...g, uplink: { fields: () => fields } }) as Record<string, unknown>;
  assert.deepEqual(JSON.parse(JSON.stringify(s.uplink)), fields);
  assert.equal((s.gateway as Record<string, unknown>).uplink, undefined, "not one string");
  const page = renderStatusPage();
  assert.match(page, /<div id="uplink" class="banner" hidden><\/div>/);
  assert.match(page, /"Uplink DOWN since "/);
  assert.match(page, /\(u\.up \? \(u\.draining \? "warn" : "ok"\) : "bad"\)/);
});

Deno.test("iggy_send_seconds and iggy_send_messages exist only with a backend that sends, and count each send", () => {
  const none = new GatewayMetrics();
  sendHistograms(none.registry, undefined); // the embedded log: nothing to watch
  assert.doesNotMatch(none.registry.toPrometheus(), /iggy_send_/);
  const m = new GatewayMetrics();
  let observe: ((seconds: number, messages: number) => void) | undefined;
  sendHistograms(m.registry, (o) => observe = o);
  observe!(0.0015, 200);
  observe!(0.0008, 90);
  const text = m.registry.toPrometheus();
  assert.match(text, /iggy_send_seconds_bucket\{le="0.001"\} 1\n/);
  assert.match(text, /iggy_send_seconds_bucket\{le="0.002"\} 2\n/);
  assert.match(text, /iggy_send_seconds_count 2\n/);
  assert.match(text, /iggy_send_messages_bucket\{le="100"\} 1\n/);
  assert.match(text, /iggy_send_messages_sum 290\n/);
});

Deno.test("the iggy_send_retries gauge has a series per kind, none without counts", () => {
  const m = new GatewayMetrics();
  const seen: { counts?: { resends: number; renewals: number; possibleDuplicates: number } } = {};
  sendRetryGauge(m.registry, () => seen.counts);
  assert.doesNotMatch(m.registry.toPrometheus(), /iggy_send_retries\{/);
  seen.counts = { resends: 1, renewals: 0, possibleDuplicates: 4 };
  assert.match(m.registry.toPrometheus(), /iggy_send_retries\{kind="possible_duplicate"\} 4/);
  assert.match(m.registry.toPrometheus(), /iggy_send_retries\{kind="resent"\} 1/);
});

Deno.test("clockJson() names the last step of the wall clock, and the page shows it as a banner", () => {
  let wall = 1_700_000_000_000;
  const clock = new WallClock({ wall: () => wall, mono: () => 0 });
  assert.deepEqual(clockJson(clock), { jumps: 0, last_jump: null });
  wall += 20 * 86_400_000;
  clock.now();
  assert.deepEqual(clockJson(clock), {
    jumps: 1,
    last_jump: { at: new Date(wall).toISOString(), direction: "forward", step_s: 1_728_000 },
  });
  assert.match(renderStatusPage(), /id="clock"/);
  assert.match(renderStatusPage(), /renderClock\(s\.clock\)/);
});
