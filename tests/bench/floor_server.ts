/**
 * The floor: the least a durable MQTT server on this runtime must do, to set the gateway's
 * figures against what Deno itself costs (issue 41's bounds are ratios to Mosquitto, a C
 * program that never syncs). Same runtime, flags and socket layer as `deno task start`
 * (`node:net`, 4 MB semi-spaces); it answers CONNECT, SUBSCRIBE and PINGREQ, appends each
 * PUBLISH's payload to one file, sends every PUBLISH on at QoS 0 to every subscriber (no
 * topic matching: only for scenarios whose subscribers want every message, the fleet, 1:1
 * and fan-out), and PUBACKs a QoS 1 PUBLISH after one `fdatasync` that started after its
 * write (one sync at a time, shared by everything written before it: a group commit).
 * No sessions, no QoS 2, no limits, no log: not a broker, a measuring stick.
 *
 *   deno run -A --v8-flags=--max-semi-space-size=4 tests/bench/floor_server.ts --port=1883 \
 *     [--file=/tmp/floor.log] [--sync=none]
 *
 * @module
 */
import net from "node:net";
import { parseArgs } from "node:util";

const a = parseArgs({
  args: Deno.args,
  options: {
    port: { type: "string", default: "1883" },
    file: { type: "string", default: "" },
    sync: { type: "string", default: "fdatasync" },
  },
});
const path = a.values.file || await Deno.makeTempFile({ prefix: "floor-server-" });
const log = await Deno.open(path, { write: true, create: true, truncate: true });
const syncing = a.values.sync !== "none";

const subscribers = new Set<net.Socket>();

/** PUBACKs waiting for the sync in flight (`covered`) or for the next one (`next`). */
let covered: [net.Socket, Uint8Array][] = [];
let next: [net.Socket, Uint8Array][] = [];
let inFlight = false;

function syncThenAck(): void {
  if (inFlight || next.length === 0) return;
  inFlight = true;
  covered = next;
  next = [];
  log.syncData().then(() => {
    for (const [s, ack] of covered) if (!s.destroyed) s.write(ack);
    covered = [];
    inFlight = false;
    syncThenAck();
  });
}

function serve(s: net.Socket): void {
  s.setNoDelay(true);
  let held: Uint8Array = new Uint8Array(0);
  s.on("data", (chunk: Uint8Array) => {
    const buf = held.length === 0 ? chunk : concat(held, chunk);
    let at = 0;
    let acks: number[] = [];
    for (;;) {
      const frame = frameAt(buf, at);
      if (frame === undefined) break;
      const { type, flags, body, end } = frame;
      if (type === 1) s.write(Uint8Array.of(0x20, 2, 0, 0));
      else if (type === 8) {
        subscribers.add(s);
        s.write(Uint8Array.of(0x90, 3, buf[body], buf[body + 1], 0));
      } else if (type === 12) s.write(Uint8Array.of(0xd0, 0));
      else if (type === 3) acks = publish(buf, flags, body, end, acks);
      at = end;
    }
    held = at < buf.length ? buf.slice(at) : new Uint8Array(0);
    if (acks.length === 0) return;
    const out = new Uint8Array(acks.length * 2);
    for (let i = 0; i < acks.length; i += 2) out.set([0x40, 2, acks[i], acks[i + 1]], i * 2);
    if (!syncing) s.write(out);
    else {
      next.push([s, out]);
      syncThenAck();
    }
  });
  s.on("close", () => subscribers.delete(s));
  s.on("error", () => {});
}

/** Appends the payload, sends the message on at QoS 0; the packet id to acknowledge, if any. */
function publish(buf: Uint8Array, flags: number, body: number, end: number, acks: number[]) {
  const qos = (flags >> 1) & 3;
  const topicEnd = body + 2 + ((buf[body] << 8) | buf[body + 1]);
  const payload = buf.subarray(topicEnd + (qos > 0 ? 2 : 0), end);
  log.writeSync(payload);
  if (qos > 0) acks.push(buf[topicEnd], buf[topicEnd + 1]);
  if (subscribers.size === 0) return acks;
  const topic = buf.subarray(body, topicEnd);
  const length = topic.length + payload.length;
  const header = lengthBytes(length);
  const out = new Uint8Array(1 + header.length + length);
  out[0] = 0x30;
  out.set(header, 1);
  out.set(topic, 1 + header.length);
  out.set(payload, 1 + header.length + topic.length);
  for (const sub of subscribers) sub.write(out);
  return acks;
}

/** The whole packet starting at `at`, or undefined while it has not all arrived. */
function frameAt(buf: Uint8Array, at: number) {
  let length = 0;
  let i = at + 1;
  for (let shift = 0; shift < 28; shift += 7) {
    if (i >= buf.length) return undefined;
    const b = buf[i++];
    length += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) {
      if (i + length > buf.length) return undefined;
      return { type: buf[at] >> 4, flags: buf[at] & 15, body: i, end: i + length };
    }
  }
  throw new Error("malformed remaining length");
}

function lengthBytes(n: number): number[] {
  const out: number[] = [];
  do {
    out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return out;
}

function concat(x: Uint8Array, y: Uint8Array): Uint8Array {
  const out = new Uint8Array(x.length + y.length);
  out.set(x);
  out.set(y, x.length);
  return out;
}

net.createServer(serve).listen(Number(a.values.port), "127.0.0.1", () => {
  console.log(`floor server on 127.0.0.1:${a.values.port}, log ${path}, sync ${a.values.sync}`);
});
Deno.addSignalListener("SIGTERM", () => {
  log.close();
  Deno.removeSync(path);
  Deno.exit(0);
});
