/**
 * The load of the bench's "ws" scenario (`_ws_scenario.ts`), over TCP or WebSocket alike, in a
 * process of its own (pinned by the harness):
 *
 *   --mode=idle    opens --conns MQTT connections (CONNECT, CONNACK), holds them --hold-ms,
 *                  prints {"open": n} once all are open (the harness reads the server's RSS then)
 *   --mode=ingest  --conns connections publish QoS 1 with --inflight in flight each for
 *                  --warmup-ms then --ms; prints {"msgPerSec": x, "cpuPercent": y}
 *
 * Over WebSocket each packet goes in one binary frame (as MQTT.js sends them); replies are read
 * as one byte stream either way.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { cpuPercent, cpuTicks } from "./_stats.ts";

const a = parseArgs({
  args: Deno.args,
  options: {
    mode: { type: "string", default: "ingest" },
    transport: { type: "string", default: "tcp" },
    port: { type: "string" },
    conns: { type: "string", default: "10" },
    inflight: { type: "string", default: "20" },
    "warmup-ms": { type: "string", default: "1000" },
    ms: { type: "string", default: "5000" },
    "hold-ms": { type: "string", default: "3000" },
  },
}).values;

const enc = new TextEncoder();

/** One MQTT connection over TCP or WebSocket: send packets, get every byte received. */
interface Link {
  send(b: Uint8Array): void;
  onData: (b: Uint8Array) => void;
  close(): void;
}

async function open(port: number): Promise<Link> {
  if (a.transport === "ws") {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/mqtt`, "mqtt");
    ws.binaryType = "arraybuffer";
    const link: Link = { send: (b) => ws.send(b), onData: () => {}, close: () => ws.close() };
    ws.onmessage = (e) => link.onData(new Uint8Array(e.data));
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    });
    return link;
  }
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const link: Link = {
    send: (b) => void conn.write(b).catch(() => {}),
    onData: () => {},
    close: () => conn.close(),
  };
  (async () => {
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) return;
      link.onData(buf.subarray(0, n));
    }
  })();
  return link;
}

function connectPacket(id: string): Uint8Array {
  const cid = enc.encode(id);
  const body = [0, 4, 77, 81, 84, 84, 4, 2, 0, 60, cid.length >> 8, cid.length & 255, ...cid];
  return new Uint8Array([0x10, body.length, ...body]);
}

function publishPacket(topic: Uint8Array, payload: Uint8Array, id: number): Uint8Array {
  const len = 2 + topic.length + 2 + payload.length;
  const out = new Uint8Array(2 + len);
  out[0] = 0x32;
  out[1] = len;
  out[2] = topic.length >> 8;
  out[3] = topic.length & 255;
  out.set(topic, 4);
  out[4 + topic.length] = id >> 8;
  out[5 + topic.length] = id & 255;
  out.set(payload, 6 + topic.length);
  return out;
}

/** Counts the PUBACKs (and sees the CONNACK) in a byte stream of small packets. */
function acks(onConnack: () => void, onPuback: () => void): (b: Uint8Array) => void {
  let pending = new Uint8Array(0);
  return (b) => {
    const all = new Uint8Array(pending.length + b.length);
    all.set(pending);
    all.set(b, pending.length);
    let i = 0;
    while (i + 2 <= all.length && i + 2 + all[i + 1] <= all.length) {
      const type = all[i] >> 4;
      if (type === 2) onConnack();
      else if (type === 4) onPuback();
      i += 2 + all[i + 1];
    }
    pending = all.slice(i);
  };
}

const port = Number(a.port);
const conns = Number(a.conns);
if (a.mode === "idle") {
  const links: Link[] = [];
  for (let i = 0; i < conns; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, conns - i) }, async (_, k) => {
      const l = await open(port);
      await new Promise<void>((resolve) => {
        l.onData = acks(resolve, () => {});
        l.send(connectPacket(`idle-${a.transport}-${i + k}`));
      });
      links.push(l);
    }));
  }
  console.log(JSON.stringify({ open: links.length }));
  await new Promise((r) => setTimeout(r, Number(a["hold-ms"])));
  for (const l of links) l.close();
} else {
  const inflight = Number(a.inflight);
  const topic = enc.encode("sensors/ws1/data");
  const payload = new Uint8Array(64).fill(0x61);
  let counting = false;
  let counted = 0;
  let stop = false;
  await Promise.all(Array.from({ length: conns }, async (_, k) => {
    const l = await open(port);
    let next = 1;
    const send = () => {
      if (stop) return;
      l.send(publishPacket(topic, payload, next));
      next = next === 65535 ? 1 : next + 1;
    };
    await new Promise<void>((resolve) => {
      l.onData = acks(() => {
        for (let i = 0; i < inflight; i++) send();
        resolve();
      }, () => {
        if (counting) counted++;
        send();
      });
      l.send(connectPacket(`load-${a.transport}-${k}`));
    });
  }));
  await new Promise((r) => setTimeout(r, Number(a["warmup-ms"])));
  const t0 = performance.now();
  const c0 = cpuTicks("self");
  counting = true;
  await new Promise((r) => setTimeout(r, Number(a.ms)));
  counting = false;
  const wall = performance.now() - t0;
  const cpu = cpuPercent(cpuTicks("self") - c0, wall);
  stop = true;
  console.log(JSON.stringify({ msgPerSec: counted / (wall / 1000), cpuPercent: cpu }));
}
Deno.exit(0);
