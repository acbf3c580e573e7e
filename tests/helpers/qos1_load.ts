/**
 * QoS 1 load for crash tests: raw MQTT publishers that keep a window of publishes in flight
 * and record which payloads got a PUBACK, until their socket dies.
 *
 * @module
 */
import { connectPacket, publishPacket } from "./gateway.ts";

/** What the publishers sent and which payloads were acknowledged. */
export interface Tally {
  sent: number;
  acked: Set<string>;
}

/** One publishing client: keeps `window` QoS 1 publishes in flight until its socket dies. */
export async function publisher(
  port: number,
  id: string,
  topic: string,
  tally: Tally,
  seqStart: { n: number },
  window = 20,
  signal?: AbortSignal,
): Promise<void> {
  let conn: Deno.TcpConn;
  try {
    conn = await Deno.connect({ hostname: "127.0.0.1", port });
  } catch {
    return;
  }
  const inflight = new Map<number, string>();
  // Aborting closes the socket: the read below then ends the loop.
  const abort = () => {
    try {
      conn.close();
    } catch { /* closed */ }
  };
  signal?.addEventListener("abort", abort);
  try {
    await conn.write(connectPacket(id));
    const buf = new Uint8Array(65536);
    let pending = new Uint8Array(0);
    let connacked = false;
    const fill = async () => {
      const out: number[] = [];
      while (inflight.size < window) {
        const seq = seqStart.n++;
        const pid = (seq % 65535) + 1;
        if (inflight.has(pid)) break;
        const payload = `${id}:${seq}`;
        inflight.set(pid, payload);
        out.push(...publishPacket(topic, payload, 1, pid));
        tally.sent++;
      }
      if (out.length) await conn.write(new Uint8Array(out));
    };
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return;
      const merged = new Uint8Array(pending.length + n);
      merged.set(pending);
      merged.set(buf.subarray(0, n), pending.length);
      let pos = 0;
      while (merged.length - pos >= 4) {
        const type = merged[pos] >> 4;
        if (type === 2) connacked = true;
        if (type === 4) {
          const pid = (merged[pos + 2] << 8) | merged[pos + 3];
          const payload = inflight.get(pid);
          if (payload !== undefined) {
            tally.acked.add(payload);
            inflight.delete(pid);
          }
        }
        pos += 4;
      }
      pending = merged.slice(pos);
      if (connacked) await fill();
    }
  } catch {
    // killed gateway: connection reset
  } finally {
    signal?.removeEventListener("abort", abort);
    try {
      conn.close();
    } catch { /* closed */ }
  }
}
