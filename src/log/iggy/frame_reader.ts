/**
 * Splits the byte stream from Iggy into frames (256-byte header + `size − 256` body bytes),
 * refusing a size below the header, and any other frame than a reply above
 * {@link MAX_FRAME_BYTES}. A reply above it (a poll whose messages were larger than its count
 * was sized for) is read past without being kept and handed on as its header alone, with
 * status {@link Status.REPLY_TOO_LARGE}: its request fails, the connection and the requests
 * after it go on. One reader for both dialects: 0.11 and 0.12 share the 256-byte framing.
 *
 * A transport with `read` (a Deno socket) is read into one buffer of this reader's own, reused
 * from read to read. Why not its `readable`: Deno's socket stream allocates a fresh 64 KiB
 * chunk for every read, and a send's reply is one small frame per read, so under QoS 1 load
 * that is a flood of short-lived ArrayBuffers for the collector, which the embedded log does not
 * pay.
 *
 * @module
 */

import { concatBytes } from "../../base/bytes.ts";
import { FrameKind, IggyConnectionError, Status } from "./codes.ts";
import type { Transport } from "./dial.ts";
import { HEADER_SIZE, ReplyOffset } from "./header_layout.ts";

/** Largest frame accepted from the server (its own cap is 64 MiB). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024 + HEADER_SIZE;

/** Bytes a poll's reply is sized for, well under {@link MAX_FRAME_BYTES}. */
export const POLL_REPLY_BYTES = 48 * 1024 * 1024;
/** A stored message's bytes beyond its MQTT packet, at most: Iggy's header, the gateway's headers. */
export const MESSAGE_OVERHEAD_BYTES = 4096;

/**
 * Messages one poll may ask for when each may be `maxMessageBytes` (undefined: no bound):
 * Iggy answers a poll in one frame, and a frame over {@link MAX_FRAME_BYTES} fails the poll and
 * its connection, every time, so a backlog of large messages could never be read. Small messages
 * still go 512 to a poll; the largest allowed go as many as fit in one frame.
 */
export function maxPollMessages(maxMessageBytes: number | undefined): number {
  if (maxMessageBytes === undefined) return Infinity;
  return Math.max(1, Math.floor(POLL_REPLY_BYTES / (maxMessageBytes + MESSAGE_OVERHEAD_BYTES)));
}

/** Bytes the direct reader keeps for reads; a larger frame grows it for that frame only. */
export const READ_BUFFER_BYTES = 64 * 1024;

type Frame = { header: Uint8Array; body: Uint8Array };

/** Reads frames from `transport` and hands each to `deliver`. */
export class FrameReader {
  readonly #transport: Pick<Transport, "readable" | "read">;
  readonly #deliver: (f: Frame) => void;
  readonly #label: string;

  /** `label` names the connection in errors. */
  constructor(
    transport: Pick<Transport, "readable" | "read">,
    deliver: (f: Frame) => void,
    label: string,
  ) {
    this.#transport = transport;
    this.#deliver = deliver;
    this.#label = label;
  }

  /** Resolves when the peer closed; rejects with an IggyConnectionError on a bad frame. */
  async run(): Promise<void> {
    try {
      const read = this.#transport.read;
      if (read) await this.#runDirect((into) => read.call(this.#transport, into));
      else await this.#runStream(this.#transport.readable);
    } catch (e) {
      if (e instanceof IggyConnectionError) throw e;
      const why = e instanceof Error ? e.message : String(e);
      throw new IggyConnectionError(`Iggy connection ${this.#label} failed: ${why}`, {
        cause: e,
      });
    }
  }

  async #runDirect(read: (into: Uint8Array) => Promise<number | null>): Promise<void> {
    let buf = new Uint8Array(READ_BUFFER_BYTES);
    let start = 0;
    let end = 0;
    let skip = 0; // bytes left of a reply too large to keep
    for (;;) {
      if (end === buf.length) {
        // Room for the rest of the frame under way: move it to the front, or grow for it.
        const need = end - start >= HEADER_SIZE ? frameSize(buf, start) : HEADER_SIZE;
        const next = need > buf.length ? new Uint8Array(need) : buf;
        next.set(buf.subarray(start, end));
        buf = next;
        end -= start;
        start = 0;
      }
      const n = await read(buf.subarray(end));
      if (n === null) return;
      end += n;
      for (;;) {
        if (skip > 0) {
          const gone = Math.min(skip, end - start);
          skip -= gone;
          start += gone;
        }
        if (end - start < HEADER_SIZE) break;
        const size = frameSize(buf, start);
        if (size > MAX_FRAME_BYTES) {
          this.#deliver(tooLarge(buf.subarray(start, start + HEADER_SIZE)));
          start += HEADER_SIZE;
          skip = size - HEADER_SIZE;
          continue;
        }
        if (end - start < size) break;
        const header = buf.slice(start, start + HEADER_SIZE);
        const body = buf.slice(start + HEADER_SIZE, start + size);
        start += size;
        this.#deliver({ header, body });
      }
      if (start === end) {
        start = end = 0;
        // A large poll reply grew the buffer: give it back once that frame is out.
        if (buf.length > READ_BUFFER_BYTES) buf = new Uint8Array(READ_BUFFER_BYTES);
      }
    }
  }

  async #runStream(readable: ReadableStream<Uint8Array>): Promise<void> {
    const reader = readable.getReader();
    let buf: Uint8Array = new Uint8Array(0);
    let skip = 0; // bytes left of a reply too large to keep
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf = buf.length === 0 ? value : concatBytes([buf, value]);
        for (;;) {
          if (skip > 0) {
            const gone = Math.min(skip, buf.length);
            skip -= gone;
            buf = buf.subarray(gone);
          }
          if (buf.length < HEADER_SIZE) break;
          const size = frameSize(buf, 0);
          if (size > MAX_FRAME_BYTES) {
            this.#deliver(tooLarge(buf.subarray(0, HEADER_SIZE)));
            buf = buf.subarray(HEADER_SIZE);
            skip = size - HEADER_SIZE;
            continue;
          }
          if (buf.length < size) break;
          const header = buf.slice(0, HEADER_SIZE);
          const body = buf.slice(HEADER_SIZE, size);
          buf = buf.subarray(size);
          this.#deliver({ header, body });
        }
      }
    } finally {
      reader.releaseLock();
    }
  }
}

/**
 * The size field (u32 LE) of the header at `at`, checked against the bounds; no view made. Only
 * a reply may be larger than {@link MAX_FRAME_BYTES} (it is read past).
 */
function frameSize(buf: Uint8Array, at: number): number {
  const i = at + ReplyOffset.SIZE;
  const size = (buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24)) >>> 0;
  const reply = buf[at + ReplyOffset.COMMAND] === FrameKind.REPLY;
  if (size < HEADER_SIZE || (size > MAX_FRAME_BYTES && !reply)) {
    throw new IggyConnectionError(`Iggy sent a frame of invalid size ${size}`);
  }
  return size;
}

/** The header of a reply too large to keep, as a frame of its own refusing its request. */
function tooLarge(header: Uint8Array): Frame {
  const h = header.slice();
  const v = new DataView(h.buffer);
  v.setUint32(ReplyOffset.SIZE, HEADER_SIZE, true);
  v.setUint32(ReplyOffset.STATUS, Status.REPLY_TOO_LARGE, true);
  return { header: h, body: new Uint8Array(0) };
}
