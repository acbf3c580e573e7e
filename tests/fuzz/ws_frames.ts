/**
 * WebSocket inputs for the live-gateway fuzz: an upgrade to `listeners.ws` (now and then a
 * mutated one), then the MQTT input of the socket fuzz carried in WebSocket frames that are
 * themselves mutated: split into continuation frames, sent as text, unmasked, with reserved
 * bits or opcodes, a length field that lies (up to 2^63), control frames too long or
 * fragmented, a close with a bad code, and the byte mutations of `random.ts` over the whole.
 * The gateway may refuse any of it; it must not crash, leak the connection or stop serving.
 *
 * @module
 */
import { concatBytes } from "../../src/base/bytes.ts";
import { int, mutate, pick, type Rand, randomBytes } from "./random.ts";

const UPGRADE = "GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n" +
  "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n";

/** One frame: `opcode`, FIN, RSV bits, masked unless `unmasked`, its real or a lying length. */
function frame(
  r: Rand,
  opcode: number,
  payload: Uint8Array,
  o: { fin?: boolean; rsv?: number; unmasked?: boolean; lie?: boolean } = {},
): Uint8Array {
  const head: number[] = [((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | (opcode & 0x0f)];
  const masked = !o.unmasked;
  const length = o.lie
    ? pick(r, [payload.length + 1, 0, 126, 65_536, 2 ** 32, 2 ** 53])
    : payload.length;
  const m = masked ? 0x80 : 0;
  if (length < 126) head.push(m | length);
  else if (length < 65_536) head.push(m | 126, length >> 8, length & 0xff);
  else {
    head.push(m | 127);
    const big = BigInt(length);
    for (let i = 7n; i >= 0n; i--) head.push(Number((big >> (8n * i)) & 0xffn));
  }
  if (!masked) return concatBytes([new Uint8Array(head), payload]);
  const key = randomBytes(r, 4);
  const body = payload.map((b, i) => b ^ key[i & 3]);
  return concatBytes([new Uint8Array(head), key, body]);
}

/** The frames of one MQTT input, fragmented or not, with one frame-level fault now and then. */
function frames(r: Rand, mqtt: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  // Cut the MQTT bytes into 1–4 binary messages, each maybe fragmented into continuations.
  const cuts = [0, ...Array.from({ length: int(r, 4) }, () => int(r, mqtt.length)), mqtt.length]
    .sort((a, b) => a - b);
  for (let k = 0; k + 1 < cuts.length; k++) {
    const part = mqtt.subarray(cuts[k], cuts[k + 1]);
    if (r() < 0.3 && part.length > 1) {
      const at = 1 + int(r, part.length - 1);
      out.push(frame(r, 2, part.subarray(0, at), { fin: false }));
      if (r() < 0.3) out.push(frame(r, 9, randomBytes(r, int(r, 20)))); // ping between
      out.push(frame(r, 0, part.subarray(at)));
    } else out.push(frame(r, 2, part));
  }
  if (r() < 0.5) {
    const fault = int(r, 9);
    const at = int(r, out.length + 1);
    const payload = randomBytes(r, int(r, 40));
    const bad = [
      () => frame(r, 1, new TextEncoder().encode("text")), // MQTT is binary only
      () => frame(r, 2, payload, { unmasked: true }),
      () => frame(r, 2, payload, { rsv: 1 + int(r, 7) }),
      () => frame(r, pick(r, [3, 4, 5, 6, 7, 11, 12, 13, 14, 15]), payload),
      () => frame(r, 2, payload, { lie: true }),
      () => frame(r, 9, randomBytes(r, 126 + int(r, 200))), // control frame over 125 bytes
      () => frame(r, 9, payload, { fin: false }), // fragmented control frame
      () => frame(r, 8, new Uint8Array([0x03, 0xe7, 0xff, 0xfe])), // bad close code, bad UTF-8
      () => frame(r, 0, payload), // continuation with nothing to continue
    ][fault];
    out.splice(at, 0, bad());
  }
  return out;
}

/** One WebSocket input: the upgrade and the frames carrying `mqtt`, maybe mutated. */
export function makeWsInput(r: Rand, mqtt: Uint8Array): Uint8Array {
  const upgrade = new TextEncoder().encode(UPGRADE);
  const parts = [r() < 0.05 ? mutate(r, upgrade, [upgrade]) : upgrade, ...frames(r, mqtt)];
  if (r() < 0.3) {
    // Byte mutations over the frames (the upgrade kept intact: the frames are the target).
    const body = concatBytes(parts.slice(1));
    return concatBytes([parts[0], mutate(r, body, [body])]);
  }
  return concatBytes(parts);
}

/**
 * Sends one WebSocket input on a fresh connection: the upgrade, the server's 101 (or refusal)
 * read, then the frames in random cuts; ends with a half-close or a short wait for the peer.
 * Returns the status line the server answered the upgrade with ("" if none): a 500 means its
 * handler threw (Deno's server prints that on its own stderr, out of a test's sight).
 */
export async function sendWsInput(port: number, input: Uint8Array, r: Rand): Promise<string> {
  let conn: Deno.TcpConn;
  try {
    conn = await Deno.connect({ hostname: "127.0.0.1", port });
  } catch {
    return ""; // listener busy: the witness decides
  }
  const end = new TextEncoder().encode(UPGRADE).length;
  let status = "";
  const drain = (async () => {
    const buf = new Uint8Array(4096);
    try {
      for (let n; (n = await conn.read(buf)) !== null;) {
        if (status === "") status = new TextDecoder().decode(buf.subarray(0, n)).split("\r\n")[0];
      }
    } catch { /* reset by peer */ }
  })();
  const halfClose = r() < 0.5;
  try {
    let off = 0;
    const cuts = [
      end,
      ...Array.from({ length: int(r, 3) }, () => int(r, input.length)),
      input.length,
    ]
      .filter((c) => c <= input.length).sort((a, b) => a - b);
    for (const cut of cuts) {
      while (off < cut) off += await conn.write(input.subarray(off, cut));
      if (off === end) await new Promise((res) => setTimeout(res, 5)); // let the 101 go out
    }
    if (halfClose) await conn.closeWrite();
  } catch { /* peer closed first */ }
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    drain,
    new Promise((res) => timer = setTimeout(res, halfClose ? 2000 : 100)),
  ]);
  clearTimeout(timer);
  try {
    conn.close();
  } catch { /* closed */ }
  await drain;
  return status;
}
