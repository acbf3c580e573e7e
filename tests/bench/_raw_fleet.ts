/**
 * The fleet scenario (issue 41): `count` connected devices, each publishing one 100-byte reading
 * every `intervalMs` (at QoS 0 or 1), spread evenly over the interval, and one subscriber of
 * every device's topic at QoS 0. What a fleet of slow devices costs a server: its CPU and RSS,
 * the PUBACK latency (QoS 1: from the write of a PUBLISH to the read of its PUBACK) and the
 * delivery latency (from the stamp in the payload to the subscriber's read).
 *
 * One synchronous epoll loop drives every socket (`_raw_socket.ts`): a device costs this
 * process a write per reading and a read per PUBACK. The send schedule is global (reading `k`
 * is due at start + k × interval / count, from device k mod count) and the loop waits until the
 * next reading is due or a socket is readable, so the load stays at count / interval whatever
 * the server does (a device whose PUBACK is still out when its next reading is due sends it
 * anyway, as a device would; its latency then counts from each write).
 *
 * @module
 */
import { encodePublish } from "./_mqtt.ts";
import { connectRaw, subscribeRaw } from "./_raw_client.ts";
import { IdleBurst } from "./_raw_idle.ts";
import { Inboxes } from "./_raw_inbox.ts";
import { EPOLLIN, Poller, type RawSocket } from "./_raw_socket.ts";
import { Histogram, rssBytes } from "./_stats.ts";

/** What the fleet scenario is given. */
export interface FleetOptions {
  readonly port: number;
  readonly serverPid: number;
  readonly count: number;
  readonly intervalMs: number;
  readonly qos: 0 | 1;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly payload: Uint8Array;
  readonly cpuWindow: () => () => Record<string, number>;
}

const PUBACK = 0x40;

/** Runs the scenario; the figures of its measured window. */
export function fleetRaw(o: FleetOptions) {
  const burst = new IdleBurst({
    port: o.port,
    count: o.count,
    inFlight: 200,
    cpuWindow: o.cpuWindow,
  });
  burst.run();
  const devices = burst.sockets;
  const sub = connectRaw(o.port, "bench-fleet-sub");
  subscribeRaw(sub, "fleet/+/data", 0);
  const inboxes = new Inboxes([sub]);
  const poller = new Poller(Math.min(4096, o.count + 8));
  devices.forEach((s, i) => poller.add(s, i, EPOLLIN));
  poller.add(sub, o.count, EPOLLIN);
  // One pre-encoded PUBLISH per device (its own topic), stamped and given an id per reading.
  const tpl = devices.map((_, i) => encodePublish(`fleet/${i}/data`, o.payload, o.qos, 1));
  const sentAt = new Float64Array(o.count);
  const ids = new Uint16Array(o.count);
  const puback = new Histogram();
  const scratch = new Uint8Array(4096);
  const start = performance.now();
  const msPerReading = o.intervalMs / o.count;
  const measureAt = start + o.warmupMs;
  const stopAt = measureAt + o.durationMs;
  let stopCpu: (() => Record<string, number>) | null = null;
  let seq = 0;
  let sent = 0;
  let acked = 0;
  let rssSum = 0;
  let rssSamples = 0;
  let lastRss = 0;
  for (;;) {
    const now = performance.now();
    if (stopCpu === null && now >= measureAt) {
      stopCpu = o.cpuWindow();
      inboxes.measuring = true;
    }
    if (now >= stopAt) break;
    if (stopCpu !== null && now - lastRss >= 1000) {
      rssSum += rssBytes(o.serverPid);
      rssSamples++;
      lastRss = now;
    }
    const due = Math.floor((now - start) / msPerReading) + 1 - seq;
    for (let k = 0; k < Math.min(due, 64); k++) {
      const d = seq % o.count;
      send(devices[d], tpl[d], seq, d);
      seq++;
      if (stopCpu !== null) sent++;
    }
    const untilNextUs = (start + seq * msPerReading - performance.now()) * 1000;
    const n = poller.waitUs(Math.max(0, untilNextUs));
    for (let k = 0; k < n; k++) {
      const i = poller.readyIndex[k];
      if (i === o.count) inboxes.read(0);
      else readAcks(i);
    }
  }
  const cpu = stopCpu!();
  const elapsedMs = performance.now() - measureAt;
  const totals = inboxes.totals();
  const rssMb = rssSamples > 0
    ? rssSum / rssSamples / 1024 / 1024
    : rssBytes(o.serverPid) / 1048576;
  inboxes.close();
  poller.close();
  burst.close();
  return {
    devices: o.count,
    intervalMs: o.intervalMs,
    qos: o.qos,
    published: sent,
    msgsPerSec: sent / (elapsedMs / 1000),
    pubacks: acked,
    puback: o.qos === 1 ? puback.summary() : null,
    deliveries: totals.deliveries,
    missing: totals.missing,
    latency: inboxes.latency.summary(),
    serverRssMb: rssMb,
    elapsedMs,
    io: "libc-epoll",
    ...cpu,
  };

  function send(
    s: RawSocket,
    t: { bytes: Uint8Array; idAt: number; payloadAt: number },
    n: number,
    d: number,
  ) {
    const view = new DataView(t.bytes.buffer, t.bytes.byteOffset);
    if (t.idAt >= 0) {
      ids[d] = ids[d] % 65535 + 1;
      view.setUint16(t.idAt, ids[d], false);
    }
    view.setUint32(t.payloadAt, n, false);
    const at = performance.now();
    view.setFloat64(t.payloadAt + 4, at, true);
    sentAt[d] = at;
    // A 100-byte reading fits any socket buffer: a short write means the server is gone.
    if (s.write(t.bytes) !== t.bytes.length) throw new Error(`Device ${d}: short write`);
  }

  /** A device's PUBACKs (4 bytes each; nothing else comes to a device). */
  function readAcks(d: number): void {
    const got = devices[d].readSome(scratch);
    if (got < 0) throw new Error(`Device ${d}: closed by the server`);
    const now = performance.now();
    for (let p = 0; p + 4 <= got; p += 4) {
      if (scratch[p] !== PUBACK) throw new Error(`Device ${d}: unexpected packet ${scratch[p]}`);
      if (stopCpu !== null && now < stopAt) {
        acked++;
        puback.recordMs(now - sentAt[d]);
      }
    }
  }
}
