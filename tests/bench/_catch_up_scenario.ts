/**
 * The "catch_up" scenario: how fast a stored session gets its backlog back. Per payload size
 * (100 B, 2 KB, 200 KB), on a gateway of its own: a clean-session-0 client subscribes
 * `sensors/+/data` at QoS 1 and leaves; about 40 MB (10 MB of 100-byte messages) are published
 * to 4 topics (3 partitions); the client comes back and reads and acknowledges as fast as it
 * can. Figures: msg/s and MB/s of payload from its CONNECT to its last message, and whether all
 * arrived (a client evicted gets fewer).
 *
 * @module
 */
import { connectMqtt, encodePublish, encodeSubscribe, writeAll } from "./_mqtt.ts";
import { gatewayServer, type LaunchOptions, type Running } from "./_servers.ts";

/** Payload bytes and message counts of the backlogs measured (full run). */
const SIZES: readonly { bytes: number; count: number }[] = [
  { bytes: 100, count: 100_000 },
  { bytes: 2048, count: 20_000 },
  { bytes: 200 * 1024, count: 200 },
];

const TOPICS = 4;

/** Publishes `count` QoS 1 messages of `bytes`, 100 (at most 4 MB) a write, acknowledged. */
async function publishBacklog(port: number, count: number, bytes: number): Promise<void> {
  const conn = await connectMqtt(port, "catch-up-publisher");
  const batch = Math.max(1, Math.min(100, Math.floor(4_000_000 / bytes)));
  const payload = new Uint8Array(bytes).fill(0x61);
  const templates = Array.from(
    { length: TOPICS },
    (_, t) => encodePublish(`sensors/${t}/data`, payload, 1),
  );
  const acks = new Uint8Array(4 * batch);
  try {
    for (let first = 0; first < count; first += batch) {
      const n = Math.min(batch, count - first);
      const parts = [];
      for (let k = 0; k < n; k++) {
        const t = templates[(first + k) % TOPICS];
        const p = t.bytes.slice();
        p[t.idAt] = (k + 1) >> 8;
        p[t.idAt + 1] = (k + 1) & 0xff;
        parts.push(p);
      }
      const all = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
      let at = 0;
      for (const p of parts) {
        all.set(p, at);
        at += p.length;
      }
      await writeAll(conn, all);
      for (let got = 0; got < 4 * n;) {
        const r = await conn.read(acks.subarray(got, 4 * n));
        if (r === null) throw new Error("publisher closed before its PUBACKs");
        got += r;
      }
    }
  } finally {
    conn.close();
  }
}

/**
 * Reads PUBLISHes, acknowledging each QoS 1 one (one write per read), until `count` arrived or
 * the socket closed or `timeoutMs` passed; how many arrived.
 */
async function readBacklog(conn: Deno.TcpConn, count: number, timeoutMs: number) {
  const timer = setTimeout(() => conn.close(), timeoutMs);
  const chunk = new Uint8Array(1 << 20);
  let buf = new Uint8Array(0);
  let received = 0;
  try {
    while (received < count) {
      const n = await conn.read(chunk);
      if (n === null) break;
      const merged = new Uint8Array(buf.length + n);
      merged.set(buf);
      merged.set(chunk.subarray(0, n), buf.length);
      const acks: number[] = [];
      let at = 0;
      for (;;) {
        let len = 0;
        let mult = 1;
        let i = at + 1;
        let complete = false;
        while (i < merged.length) {
          len += (merged[i] & 0x7f) * mult;
          mult *= 128;
          if ((merged[i++] & 0x80) === 0) {
            complete = true;
            break;
          }
        }
        if (!complete || i + len > merged.length) break;
        if (merged[at] >> 4 === 3) {
          received++;
          if (((merged[at] >> 1) & 3) > 0) {
            const tlen = (merged[i] << 8) | merged[i + 1];
            acks.push(0x40, 2, merged[i + 2 + tlen], merged[i + 3 + tlen]);
          }
        }
        at = i + len;
      }
      buf = merged.slice(at);
      if (acks.length > 0) await writeAll(conn, new Uint8Array(acks));
    }
  } catch { /* closed at the timeout */ }
  clearTimeout(timer);
  return received;
}

/** One backlog on a fresh gateway: the figures of its catch-up. */
async function oneBacklog(s: Running, bytes: number, count: number) {
  const id = `catch-up-${bytes}`;
  const first = await connectMqtt(s.port, id, 600, false);
  await writeAll(first, encodeSubscribe(1, "sensors/+/data", 1));
  const suback = new Uint8Array(5);
  for (let got = 0; got < 5;) got += (await first.read(suback.subarray(got))) ?? 5;
  await writeAll(first, new Uint8Array([0xe0, 0]));
  first.close();
  await publishBacklog(s.port, count, bytes);
  const t0 = performance.now();
  const back = await connectMqtt(s.port, id, 600, false);
  const received = await readBacklog(back, count, 120_000);
  const seconds = (performance.now() - t0) / 1000;
  back.close();
  return {
    payloadBytes: bytes,
    messages: count,
    received,
    msgPerSec: Math.round(received / seconds),
    mbPerSec: Number((received * bytes / 1e6 / seconds).toFixed(1)),
  };
}

/** Runs the scenario: one fresh gateway per backlog size. */
export async function catchUpScenario(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  smoke: boolean,
) {
  const out = [];
  for (const { bytes, count } of SIZES) {
    const s = await gatewayServer(dataDir, flags, "gateway", {
      IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(256 * 1024),
    }).start(launch);
    try {
      out.push(await oneBacklog(s, bytes, smoke ? Math.ceil(count / 100) : count));
    } finally {
      await s.stop();
    }
  }
  return out;
}
