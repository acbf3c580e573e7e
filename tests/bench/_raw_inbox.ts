/**
 * The subscriber side of the raw-socket delivery scenarios: each subscriber's socket reads into
 * its own buffer, and the received bytes are scanned for PUBLISH packet boundaries in place
 * (fixed header + remaining length; the stamp at the payload's start), so a delivery costs no
 * object and no call per packet beyond the scan. What the Deno-socket subscribers paid per read
 * (an op, a promise, a wake) mattered because Mosquitto writes every delivery on its own.
 *
 * @module
 */
import { STAMP_BYTES } from "./_raw_client.ts";
import type { RawSocket } from "./_raw_socket.ts";
import { Histogram } from "./_stats.ts";

/** Per-subscriber read buffer (bytes); a read takes at most what is free in it. */
const INBOX_BYTES = 64 * 1024;

/**
 * Every subscriber of one scenario: sockets, buffers and counters in typed arrays. `missing`
 * counts sequence numbers never received; `reordered` counts arrivals below the highest seen
 * (the gateway delivers an unkeyed MQTT topic from several log partitions, so order across
 * partitions is not kept).
 */
export class Inboxes {
  readonly socks: readonly RawSocket[];
  /** Deliveries are counted and their latency recorded only while this is set. */
  measuring = false;
  /** Reads and stamped PUBLISHes so far, every phase: what fan-out's coalescing adapts to. */
  reads = 0;
  publishes = 0;
  #countedReads = 0;
  readonly latency = new Histogram();
  /** Highest sequence number each subscriber has seen (-1 before the first). */
  readonly lastSeq: Float64Array;
  readonly #firstSeq: Float64Array;
  readonly #received: Float64Array;
  readonly #counted: Float64Array;
  readonly #reordered: Float64Array;
  readonly #bufs: Uint8Array[];
  readonly #views: DataView[];
  readonly #ends: Int32Array;

  constructor(socks: readonly RawSocket[]) {
    const n = socks.length;
    this.socks = socks;
    this.lastSeq = new Float64Array(n).fill(-1);
    this.#firstSeq = new Float64Array(n).fill(-1);
    this.#received = new Float64Array(n);
    this.#counted = new Float64Array(n);
    this.#reordered = new Float64Array(n);
    this.#bufs = socks.map(() => new Uint8Array(INBOX_BYTES));
    this.#views = this.#bufs.map((b) => new DataView(b.buffer));
    this.#ends = new Int32Array(n);
  }

  /** One read of subscriber `i` and a scan of what it completed; throws when the server closed. */
  read(i: number): void {
    const buf = this.#bufs[i];
    const got = this.socks[i].readSome(buf, this.#ends[i]);
    if (got < 0) throw new Error("Connection closed by the server under a subscriber");
    this.reads++;
    if (this.measuring) this.#countedReads++;
    const end = this.#ends[i] + got;
    const used = this.#scan(i, buf, this.#views[i], end, performance.now());
    if (used > 0 && used < end) buf.copyWithin(0, used, end);
    this.#ends[i] = end - used;
  }

  /** Scans `buf[0..end)` for complete packets, counting each stamped PUBLISH; bytes consumed. */
  #scan(i: number, buf: Uint8Array, view: DataView, end: number, now: number): number {
    let pos = 0;
    while (end - pos >= 2) {
      let len = buf[pos + 1];
      let at = pos + 2;
      if (len & 0x80) {
        len &= 0x7f;
        for (let mul = 128;; mul *= 128, at++) {
          if (at >= end || at > pos + 4) return pos;
          len += (buf[at] & 0x7f) * mul;
          if ((buf[at] & 0x80) === 0) break;
        }
        at++;
      }
      if (end - at < len) break;
      const first = buf[pos];
      if ((first & 0xf0) === 0x30) {
        // Topic name, then a packet id at QoS > 0, then the payload with the stamp.
        const p = at + 2 + ((buf[at] << 8) | buf[at + 1]) + ((first & 0x06) === 0 ? 0 : 2);
        if (at + len - p >= STAMP_BYTES) this.#count(i, view.getUint32(p, false), view, p, now);
      }
      pos = at + len;
    }
    return pos;
  }

  #count(i: number, seq: number, view: DataView, p: number, now: number): void {
    if (this.#firstSeq[i] < 0) this.#firstSeq[i] = seq;
    this.publishes++;
    this.#received[i]++;
    if (seq < this.lastSeq[i]) this.#reordered[i]++;
    else this.lastSeq[i] = seq;
    if (this.measuring) {
      this.#counted[i]++;
      this.latency.recordMs(now - view.getFloat64(p + 4, true));
    }
  }

  /** The lowest of the subscribers' highest sequence numbers seen (-1 before any). */
  slowest(): number {
    let min = Infinity;
    for (let i = 0; i < this.lastSeq.length; i++) {
      if (this.lastSeq[i] < min) min = this.lastSeq[i];
    }
    return min;
  }

  /** Totals over every subscriber; `deliveriesPerRead` over the measured window. */
  totals() {
    let deliveries = 0;
    let missing = 0;
    let reordered = 0;
    for (let i = 0; i < this.socks.length; i++) {
      deliveries += this.#counted[i];
      reordered += this.#reordered[i];
      if (this.lastSeq[i] >= 0) {
        missing += Math.max(0, this.lastSeq[i] - this.#firstSeq[i] + 1 - this.#received[i]);
      }
    }
    const deliveriesPerRead = this.#countedReads > 0 ? deliveries / this.#countedReads : null;
    return { deliveries, missing, reordered, deliveriesPerRead };
  }

  close(): void {
    for (const s of this.socks) s.close();
  }
}
