/**
 * One trace from the device to the subscriber. The gateway runs as a process with
 * `OTEL_DENO=true`, exporting OTLP (http/json, which Deno's exporter sends with
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) to a receiver in this test: a reading published with
 * a `traceparent` user property shows its publish, append and delivery spans under that trace,
 * its stored message carries the W3C headers (read back through the log with `read --json`),
 * and an MQTT 5 subscriber (MQTT.js) gets the same trace id. A 3.1.1 reading starts a trace of
 * its own; a malformed `traceparent` is ignored and counted in /metrics; a will's `traceparent`
 * is taken up as a PUBLISH's (publish and append spans, the header stored once). Without the export
 * (this test process), a device's `traceparent` is stored and delivered as it was sent, a
 * malformed one stays a plain user property, and a 3.1.1 reading gets no trace.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import mqttPacket from "mqtt-packet";
import { RawClient, startGateway, waitFor } from "../helpers/gateway.ts";
import { tripleOf } from "./_subscribe_helpers.ts";
import { spawnGateway } from "../helpers/process.ts";
import { cli, ROOT } from "../helpers/cli.ts";
import { removeStore } from "../helpers/store.ts";

/** A span as the OTLP JSON export writes it. */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  links?: { traceId: string; spanId: string }[];
  attributes?: { key: string; value: { stringValue?: string } }[];
}

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const DEVICE_SPAN = "00f067aa0ba902b7";
const DEVICE_TRACEPARENT = `00-${TRACE_ID}-${DEVICE_SPAN}-01`;
const MALFORMED = "00-not-a-trace-01";
const WILL_TRACE_ID = "5bf92f3577b34da6a3ce929d0e0e4737";
const WILL_TRACEPARENT = `00-${WILL_TRACE_ID}-${DEVICE_SPAN}-01`;
// Maps to stream building_north, topic telemetry (config/gateway.toml's quick-start map).
const TOPIC = "building/north/room/7/temp";

/** The receiver's spans, and a function that waits for one. */
function otlpReceiver() {
  const spans: OtlpSpan[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const body = await req.json().catch(() => ({}));
    if (new URL(req.url).pathname === "/v1/traces") {
      for (const rs of body.resourceSpans ?? []) {
        for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
      }
    }
    return Response.json({});
  });
  return { spans, server };
}

function attr(s: OtlpSpan, key: string): string | undefined {
  return s.attributes?.find((a) => a.key === key)?.value.stringValue;
}

function traceIdOf(traceparent: unknown): string {
  assert.equal(typeof traceparent, "string");
  assert.match(traceparent as string, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  return (traceparent as string).slice(3, 35);
}

Deno.test({
  name:
    "a reading published with a traceparent: publish, append and delivery spans under that trace, the header in the log, the trace id at the MQTT 5 subscriber; a malformed one is ignored and counted; a will's is taken up as a PUBLISH's",
  async fn() {
    const { spans, server } = otlpReceiver();
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/trace-${crypto.randomUUID()}.db`;
    const gw = await spawnGateway({
      IGGY_MQTT_EMBEDDED_PATH: db,
      OTEL_DENO: "true",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${server.addr.port}`,
      OTEL_SERVICE_NAME: "iggy-mqtt-gateway-trace-test",
      OTEL_BSP_SCHEDULE_DELAY: "200",
    });
    const url = `mqtt://127.0.0.1:${gw.port}`;
    const sub = await mqtt.connectAsync(url, { clientId: "trace-sub", protocolVersion: 5 });
    const pub = await mqtt.connectAsync(url, { clientId: "trace-pub", protocolVersion: 5 });
    const old = await mqtt.connectAsync(url, { clientId: "trace-311", protocolVersion: 4 });
    try {
      const got: { payload: string; users: Record<string, unknown> }[] = [];
      sub.on("message", (_t, payload, packet) => {
        const users = { ...(packet.properties?.userProperties ?? {}) };
        got.push({ payload: payload.toString(), users });
      });
      await sub.subscribeAsync(TOPIC, { qos: 1 });

      // 1. A reading in the device's trace.
      await pub.publishAsync(TOPIC, "21.5", {
        qos: 1,
        properties: {
          userProperties: { site: "north", traceparent: DEVICE_TRACEPARENT, tracestate: "fleet=a" },
        },
      });
      await waitFor(() => got.length === 1, 5000, "the traced reading at the subscriber");
      const traced = got[0];
      assert.equal(traced.payload, "21.5");
      assert.equal(traceIdOf(traced.users.traceparent), TRACE_ID);
      assert.equal(traced.users.tracestate, "fleet=a");
      assert.equal(traced.users.site, "north");
      // The subscriber's parent is the gateway's publish span, a child of the device's span.
      const publishSpanId = (traced.users.traceparent as string).slice(36, 52);
      assert.notEqual(publishSpanId, DEVICE_SPAN);

      const inTrace = (name: string) =>
        spans.find((s) => s.traceId === TRACE_ID && s.name === name);
      await waitFor(
        () => ["mqtt.publish", "log.append", "delivery.batch"].every((n) => inTrace(n)),
        15_000,
        "publish, append and delivery spans under the device's trace",
      );
      const publish = inTrace("mqtt.publish")!;
      assert.equal(publish.parentSpanId, DEVICE_SPAN);
      assert.equal(publish.spanId, publishSpanId);
      assert.equal(attr(publish, "mqtt.topic"), TOPIC);
      assert.equal(inTrace("log.append")!.parentSpanId, publishSpanId);
      assert.equal(inTrace("delivery.batch")!.parentSpanId, publishSpanId);

      // 2. A 3.1.1 reading: a trace of its own, carried to the MQTT 5 subscriber.
      await old.publishAsync(TOPIC, "21.6", { qos: 1 });
      await waitFor(() => got.length === 2, 5000, "the 3.1.1 reading at the subscriber");
      const newTrace = traceIdOf(got[1].users.traceparent);
      assert.notEqual(newTrace, TRACE_ID);
      assert.deepEqual(Object.keys(got[1].users), ["traceparent"]);
      await waitFor(
        () => spans.some((s) => s.traceId === newTrace && s.name === "mqtt.publish"),
        15_000,
        "the 3.1.1 reading's publish span, root of its trace",
      );
      const root = spans.find((s) => s.traceId === newTrace && s.name === "mqtt.publish")!;
      assert.equal(root.parentSpanId ?? "", "");

      // 3. A malformed traceparent: ignored and counted; a new trace takes its place.
      await pub.publishAsync(TOPIC, "21.7", {
        qos: 1,
        properties: { userProperties: { traceparent: MALFORMED, tracestate: "fleet=b" } },
      });
      await waitFor(() => got.length === 3, 5000, "the reading with a malformed traceparent");
      const restarted = traceIdOf(got[2].users.traceparent);
      assert.notEqual(restarted, TRACE_ID);
      assert.notEqual(restarted, newTrace);
      assert.equal(got[2].users.tracestate, "fleet=b"); // not read, passed on as sent
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /^mqtt_traceparent_malformed_total 1$/m);
      const warn = gw.output.join("").split("\n").find((l) => l.includes("Malformed traceparent"));
      assert.ok(warn, "one warn line");
      assert.equal(JSON.parse(warn).traceparent, MALFORMED);
      assert.equal(JSON.parse(warn).client_id, "trace-pub");

      // The log: the W3C headers once, beside the other user properties.
      const r = await cli(
        ["read", "--stream", "building_north", "--topic", "telemetry", "--json"],
        { env: { IGGY_MQTT_EMBEDDED_PATH: db } },
      );
      assert.equal(r.code, 0, r.stderr);
      const stored = r.stdout.trim().split("\n").map((l) => JSON.parse(l).headers);
      const first = stored.find((h) => h["mqtt.client_id"] === "trace-pub" && h.traceparent);
      assert.equal(first.traceparent, traced.users.traceparent);
      assert.equal(first.tracestate, "fleet=a");
      assert.equal(first["mqtt5.user.0.site"], "north");
      assert.equal(Object.keys(first).filter((k) => k.includes("trace")).length, 2);
      const third = stored.find((h) => h["mqtt5.user.1.tracestate"] === "fleet=b");
      assert.equal(traceIdOf(third.traceparent), restarted);
      assert.equal(third.tracestate, undefined);

      // 4. Twenty traced readings in one read: one append batch, in the first one's trace,
      // linked to its connection and the next ones, 16 links at most.
      const raw = await RawClient.connect(gw.port);
      const gen = (p: Record<string, unknown>) =>
        new Uint8Array(
          mqttPacket.generate(p as unknown as mqttPacket.Packet, { protocolVersion: 5 }),
        );
      await raw.send(
        gen({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: 5,
          clientId: "trace-batch",
          clean: true,
          keepalive: 60,
        }),
      );
      assert.equal((await raw.readPacket())?.[0], 0x20);
      const ids = Array.from({ length: 20 }, (_, i) => (0xa0 + i).toString(16).padStart(32, "0"));
      const read = ids.map((id, i) =>
        gen({
          cmd: "publish",
          topic: TOPIC,
          payload: `batch-${i}`,
          qos: 1,
          messageId: i + 1,
          properties: { userProperties: { traceparent: `00-${id}-${DEVICE_SPAN}-01` } },
        })
      );
      await raw.send(new Uint8Array(read.flatMap((b) => [...b])));
      for (let i = 0; i < 20; i++) assert.equal((await raw.readPacket(5000))?.[0], 0x40); // PUBACKs
      raw.close();
      await waitFor(
        () => spans.some((s) => s.traceId === ids[0] && s.name === "log.append"),
        15_000,
        "the batch's append span",
      );
      const batch = spans.find((s) => s.traceId === ids[0] && s.name === "log.append")!;
      assert.equal(batch.links?.length, 16);
      const linked = new Set(batch.links!.map((l) => l.traceId));
      for (const id of ids.slice(1, 16)) assert.ok(linked.has(id), `linked: ${id}`);
      assert.equal(spans.some((s) => s.traceId === ids[19] && s.name === "log.append"), false);
      // Delivered as one batch too: 16 of the next readings linked, besides the subscriber.
      await waitFor(
        () => spans.some((s) => s.traceId === ids[0] && s.name === "delivery.batch"),
        15_000,
        "the batch's delivery span",
      );
      const out = spans.find((s) => s.traceId === ids[0] && s.name === "delivery.batch")!;
      const readings = out.links!.filter((l) => ids.includes(l.traceId));
      assert.deepEqual(readings.map((l) => l.traceId), ids.slice(1, 17));
      await waitFor(
        () => ids.every((id) => spans.some((s) => s.traceId === id && s.name === "mqtt.publish")),
        15_000,
        "every reading's publish span",
      );

      // 5. A will with a traceparent: published like a PUBLISH, in the device's trace.
      const dev = await mqtt.connectAsync(url, {
        clientId: "trace-will",
        protocolVersion: 5,
        reconnectPeriod: 0,
        will: {
          topic: TOPIC,
          payload: Buffer.from("offline"),
          qos: 1,
          retain: false,
          properties: { userProperties: { traceparent: WILL_TRACEPARENT } },
        },
      });
      // deno-lint-ignore no-explicit-any
      (dev as any).stream.destroy(); // the network connection ends without DISCONNECT
      await waitFor(() => got.some((m) => m.payload === "offline"), 5000, "the will delivered");
      const willCopy = got.find((m) => m.payload === "offline")!;
      assert.deepEqual(Object.keys(willCopy.users), ["traceparent"]);
      assert.equal(traceIdOf(willCopy.users.traceparent), WILL_TRACE_ID);
      const willSpanId = (willCopy.users.traceparent as string).slice(36, 52);
      const inWill = (name: string) =>
        spans.find((s) => s.traceId === WILL_TRACE_ID && s.name === name);
      await waitFor(
        () => ["mqtt.publish", "log.append"].every((n) => inWill(n)),
        15_000,
        "the will's publish and append spans under the device's trace",
      );
      assert.equal(inWill("mqtt.publish")!.parentSpanId, DEVICE_SPAN);
      assert.equal(inWill("mqtt.publish")!.spanId, willSpanId);
      assert.equal(attr(inWill("mqtt.publish")!, "mqtt.client_id"), "trace-will");
      assert.equal(inWill("log.append")!.parentSpanId, willSpanId);
      const willRead = await cli(
        ["read", "--stream", "building_north", "--topic", "telemetry", "--json"],
        { env: { IGGY_MQTT_EMBEDDED_PATH: db } },
      );
      const willHeaders = willRead.stdout.trim().split("\n").map((l) => JSON.parse(l).headers)
        .find((h) => h["mqtt.client_id"] === "trace-will");
      assert.equal(willHeaders.traceparent, willCopy.users.traceparent);
      assert.equal(Object.keys(willHeaders).filter((k) => k.includes("trace")).length, 1);
    } finally {
      await Promise.all([sub.endAsync(), pub.endAsync(), old.endAsync()]);
      await gw.stop();
      await server.shutdown();
      await removeStore(`${ROOT}${db}`);
    }
  },
});

Deno.test("telemetry not exported: a traceparent (a will's too) is stored once under its W3C name and delivered as sent; a malformed one stays a plain user property and is counted", async () => {
  assert.notEqual(Deno.env.get("OTEL_DENO"), "true", "this test runs without the export");
  const gw = await startGateway();
  const url = `mqtt://127.0.0.1:${gw.port}`;
  const sub = await mqtt.connectAsync(url, { protocolVersion: 5, reconnectPeriod: 0 });
  const pub = await mqtt.connectAsync(url, { protocolVersion: 5, reconnectPeriod: 0 });
  const old = await mqtt.connectAsync(url, { protocolVersion: 4, reconnectPeriod: 0 });
  try {
    const got: (Record<string, unknown> | undefined)[] = [];
    sub.on("message", (_t, _p, packet) => got.push(packet.properties?.userProperties));
    await sub.subscribeAsync("sensors/tr/data", { qos: 1 });
    await pub.publishAsync("sensors/tr/data", "1", {
      qos: 1,
      properties: { userProperties: { traceparent: DEVICE_TRACEPARENT, tracestate: "fleet=a" } },
    });
    await pub.publishAsync("sensors/tr/data", "2", {
      qos: 1,
      properties: { userProperties: { traceparent: MALFORMED } },
    });
    await old.publishAsync("sensors/tr/data", "3", { qos: 1 });
    await waitFor(() => got.length === 3, 5000, "three copies");
    assert.deepEqual({ ...got[0] }, { traceparent: DEVICE_TRACEPARENT, tracestate: "fleet=a" });
    assert.deepEqual({ ...got[1] }, { traceparent: MALFORMED });
    assert.equal(got[2], undefined); // no trace begun for a 3.1.1 reading
    assert.match(gw.view.prometheus(), /^mqtt_traceparent_malformed_total 1$/m);
    const stored = await gw.view.log.poll(tripleOf("sensors", "sensor_data", "sensor_tr"), 0, 10);
    assert.equal(stored.length, 3);
    assert.equal(stored[0].headers.get("traceparent"), DEVICE_TRACEPARENT);
    assert.equal(stored[0].headers.get("tracestate"), "fleet=a");
    assert.equal([...stored[0].headers.keys()].filter((k) => k.includes("trace")).length, 2);
    assert.equal(stored[1].headers.get("mqtt5.user.0.traceparent"), MALFORMED);
    assert.equal(stored[1].headers.has("traceparent"), false);
    assert.equal(stored[2].headers.has("traceparent"), false);
    // A will's traceparent: stored once under its W3C name too, not as a plain user property.
    const dev = await mqtt.connectAsync(url, {
      protocolVersion: 5,
      reconnectPeriod: 0,
      will: {
        topic: "sensors/tr/data",
        payload: Buffer.from("offline"),
        qos: 1,
        retain: false,
        properties: { userProperties: { traceparent: WILL_TRACEPARENT } },
      },
    });
    // deno-lint-ignore no-explicit-any
    (dev as any).stream.destroy(); // the network connection ends without DISCONNECT
    await waitFor(() => got.length === 4, 5000, "the will");
    assert.deepEqual({ ...got[3] }, { traceparent: WILL_TRACEPARENT });
    const will = (await gw.view.log.poll(tripleOf("sensors", "sensor_data", "sensor_tr"), 3, 1))[0];
    assert.equal(will.headers.get("traceparent"), WILL_TRACEPARENT);
    assert.equal([...will.headers.keys()].filter((k) => k.includes("trace")).length, 1);
  } finally {
    await Promise.all([sub.endAsync(), pub.endAsync(), old.endAsync()]);
    await gw.stop();
  }
});
