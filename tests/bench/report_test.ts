/**
 * The bench report marks figures a saturated load generator may have capped (issue: a
 * QoS 1 "win" measured the client, not Mosquitto). No servers run here: figures go in, the
 * rows and table come out.
 */
import assert from "node:assert/strict";
import { CLIENT_BOUND_PCT, figureRows, renderTable } from "./_report.ts";

const SERVERS = ["gateway", "mosquitto", "aedes"];

function qos1(gateway: number, mosquitto: number, loadgenCpu: Record<string, number>) {
  const run = (msgsPerSec: number, server: string) => ({
    msgsPerSec,
    puback: { p50: 1, p99: 2, p999: 3 },
    loadgenCpuPct: loadgenCpu[server] ?? 20,
  });
  return {
    qos1: {
      gateway: run(gateway, "gateway"),
      mosquitto: run(mosquitto, "mosquitto"),
      aedes: run(10_000, "aedes"),
    },
  };
}

Deno.test("bench report: a saturated load generator on the peer's run makes the ratio an upper bound, never a win", () => {
  // The case: mosquitto's run capped by the client (97.9%), the gateway's not.
  const rows = figureRows(qos1(160_000, 100_000, { mosquitto: 97.9 }), SERVERS);
  const row = rows.find((r) => r.id === "qos1")!;
  assert.deepEqual(row.clientBound, ["mosquitto"]);
  assert.equal(row.floorMet, null, "1.6x against a capped peer is not a met floor");
  const line = renderTable(rows, SERVERS).split("\n").find((l) => l.startsWith("| QoS 1 ingest"))!;
  assert.match(line, /\| ≤ 1\.60× \|/);
  assert.match(line, /client-bound \(mosquitto\)/);
  assert.doesNotMatch(line, /\| yes/);
});

Deno.test("bench report: a bound below the floor is still a miss; below the threshold nothing is marked", () => {
  const missed = figureRows(qos1(50_000, 100_000, { mosquitto: 99 }), SERVERS)
    .find((r) => r.id === "qos1")!;
  assert.equal(missed.floorMet, false, "at most 0.5x is below the 1x floor whatever the bound");
  const clean = figureRows(qos1(160_000, 100_000, { mosquitto: CLIENT_BOUND_PCT - 1 }), SERVERS);
  const row = clean.find((r) => r.id === "qos1")!;
  assert.deepEqual(row.clientBound, []);
  assert.equal(row.floorMet, true);
  // Latency figures are not capped by the client's CPU: never marked.
  const p99 = figureRows(qos1(160_000, 100_000, { mosquitto: 99 }), SERVERS)
    .find((r) => r.id === "qos1_p99")!;
  assert.deepEqual(p99.clientBound, []);
});

Deno.test("bench report: the gateway's own run capped makes the ratio a lower bound", () => {
  const rows = figureRows(qos1(160_000, 100_000, { gateway: 95 }), SERVERS);
  const line = renderTable(rows, SERVERS).split("\n").find((l) => l.startsWith("| QoS 1 ingest"))!;
  assert.match(line, /\| ≥ 1\.60× \|/);
  assert.match(line, /client-bound \(gateway\)/);
});

Deno.test("bench report: connects/s of the idle scenario is marked client-bound; its RSS per connection is not", () => {
  const run = (connectsPerSec: number, loadgenCpuPct: number) => ({
    connectsPerSec,
    rssPerConnBytes: 3000,
    loadgenCpuPct,
  });
  const results = {
    idle: { gateway: run(6_000, 40), mosquitto: run(9_000, CLIENT_BOUND_PCT + 1) },
  };
  const rows = figureRows(results, ["gateway", "mosquitto"]);
  const cps = rows.find((r) => r.id === "idle_cps")!;
  assert.deepEqual(cps.clientBound, ["mosquitto"]);
  const line = renderTable(rows, ["gateway", "mosquitto"]).split("\n")
    .find((l) => l.startsWith("| connects/s"))!;
  assert.match(line, /\| ≤ 0\.67× \|/);
  assert.match(line, /client-bound \(mosquitto\)/);
  // Memory is not a rate the client's CPU caps: never marked.
  assert.deepEqual(rows.find((r) => r.id === "idle_rss")!.clientBound, []);
});

Deno.test("bench report: with the floor server in the run, a gw/floor column beside the peers", () => {
  const results = qos1(20_000, 50_000, {}) as Record<string, Record<string, unknown>>;
  results.qos1["deno-floor"] = { msgsPerSec: 25_000, loadgenCpuPct: 20 };
  const servers = [...SERVERS, "deno-floor"];
  const table = renderTable(figureRows(results, servers), servers).split("\n");
  assert.match(table[0], /\| gw\/mosquitto \| gw\/aedes \| gw\/floor \| floor \(goal\) \|/);
  const line = table.find((l) => l.startsWith("| QoS 1 ingest"))!;
  assert.match(line, /\| 0\.40× \| 2\.00× \| 0\.80× \|/);
  // Without it, no such column.
  assert.doesNotMatch(renderTable(figureRows(qos1(1, 1, {}), SERVERS), SERVERS), /gw\/floor/);
});
