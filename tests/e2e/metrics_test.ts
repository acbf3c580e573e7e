/**
 * /metrics and the OpenTelemetry export carry the same counters: a known workload, then both
 * are read and compared. The gateway runs as a process with `OTEL_DENO=true`, exporting OTLP
 * (http/json) to a receiver in this test.
 */
import assert from "node:assert/strict";
import { connectRaw, pingBarrier, publishPacket, waitFor } from "../helpers/gateway.ts";
import { spawnGateway } from "../helpers/process.ts";
import { removeStore } from "../helpers/store.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

interface OtlpPoint {
  attributes?: { key: string; value: { stringValue?: string } }[];
  asInt?: string | number;
  asDouble?: number;
}

/** Latest value of an OTLP sum per `outcome` label. */
function otlpCounter(bodies: unknown[], name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const body of bodies) {
    // deno-lint-ignore no-explicit-any
    for (const rm of (body as any).resourceMetrics ?? []) {
      for (const sm of rm.scopeMetrics ?? []) {
        for (const m of sm.metrics ?? []) {
          if (m.name !== name) continue;
          for (const p of (m.sum?.dataPoints ?? []) as OtlpPoint[]) {
            const label = p.attributes?.find((a) => a.key === "outcome")?.value.stringValue ?? "";
            out.set(label, Number(p.asInt ?? p.asDouble ?? 0));
          }
        }
      }
    }
  }
  return out;
}

function promCounter(text: string, name: string, outcome: string): number {
  const m = new RegExp(`^${name}\\{outcome="${outcome}"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

Deno.test({
  name:
    "/metrics after a known workload shows exact outcome counts, and the OTLP export carries the same figures and append spans",
  async fn() {
    const metricBodies: unknown[] = [];
    const spanNames = new Set<string>();
    const receiver = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
      const body = await req.json().catch(() => ({}));
      const path = new URL(req.url).pathname;
      if (path === "/v1/metrics") metricBodies.push(body);
      if (path === "/v1/traces") {
        for (const rs of body.resourceSpans ?? []) {
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) spanNames.add(s.name);
          }
        }
      }
      return Response.json({});
    });
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/metrics-${crypto.randomUUID()}.db`;
    const gw = await spawnGateway({
      IGGY_MQTT_EMBEDDED_PATH: db,
      OTEL_DENO: "true",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.addr.port}`,
      OTEL_METRIC_EXPORT_INTERVAL: "300",
      OTEL_SERVICE_NAME: "iggy-mqtt-gateway-test",
    });
    const port = gw.port;
    const httpPort = gw.httpPort!;
    try {
      const c = await connectRaw(port, "metrics-1");
      const bytes: number[] = [];
      for (let i = 1; i <= 50; i++) bytes.push(...publishPacket("sensors/m/data", `q1-${i}`, 1, i));
      for (let i = 1; i <= 20; i++) bytes.push(...publishPacket("sensors/m/data", `q0-${i}`, 0));
      for (let i = 1; i <= 3; i++) bytes.push(...publishPacket("$SYS/x", "no", 0));
      await c.send(new Uint8Array(bytes));
      const acks = await pingBarrier(c);
      assert.equal(acks.length, 50);
      c.close();
      const scrape = async () => {
        const r = await fetch(`http://127.0.0.1:${httpPort}/metrics`);
        return await r.text();
      };
      await waitFor(
        async () => promCounter(await scrape(), "mqtt_publishes_total", "appended") === 20,
        5000,
        "QoS 0 appends",
      );
      const text = await scrape();
      assert.equal(promCounter(text, "mqtt_publishes_total", "acked"), 50);
      assert.equal(promCounter(text, "mqtt_publishes_total", "appended"), 20);
      assert.equal(promCounter(text, "mqtt_publishes_total", "denied"), 3);
      assert.match(text, /^mqtt_puback_latency_seconds_count 50$/m);
      // The same counters through OTLP.
      await waitFor(
        () => {
          const o = otlpCounter(metricBodies, "mqtt_publishes_total");
          return o.get("acked") === 50 && o.get("appended") === 20 && o.get("denied") === 3;
        },
        10_000,
        "OTLP export with the same figures",
      );
      await waitFor(() => spanNames.has("log.append"), 10_000, "log.append spans");
    } finally {
      await gw.stop();
      await receiver.shutdown();
      await removeStore(`${ROOT}${db}`);
    }
  },
});
