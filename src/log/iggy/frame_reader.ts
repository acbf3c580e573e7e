/**
 * Splits the byte stream from Iggy into frames (256-byte header + `size − 256` body bytes),
 * refusing a size below the header or above {@link MAX_FRAME_BYTES}. One reader for both
 * dialects: 0.11 and 0.12 share the 256-byte framing (IGGY-0.12.md §2).
 *
 * @module
 */

import { concatBytes } from "../../base/bytes.ts";
import { IggyConnectionError } from "./codes.ts";
import { HEADER_SIZE, readFrameSize } from "./header.ts";

/** Largest frame accepted from the server (its own cap is 64 MiB). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024 + HEADER_SIZE;

/** Reads frames from `readable` and hands each to `deliver`. */
export class FrameReader {
  readonly #readable: ReadableStream<Uint8Array>;
  readonly #deliver: (f: { header: Uint8Array; body: Uint8Array }) => void;
  readonly #label: string;

  /** `label` names the connection in errors. */
  constructor(
    readable: ReadableStream<Uint8Array>,
    deliver: (f: { header: Uint8Array; body: Uint8Array }) => void,
    label: string,
  ) {
    this.#readable = readable;
    this.#deliver = deliver;
    this.#label = label;
  }

  /** Resolves when the peer closed; rejects with an IggyConnectionError on a bad frame. */
  async run(): Promise<void> {
    const reader = this.#readable.getReader();
    let buf: Uint8Array = new Uint8Array(0);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf = buf.length === 0 ? value : concatBytes([buf, value]);
        while (buf.length >= HEADER_SIZE) {
          const size = readFrameSize(buf);
          if (size < HEADER_SIZE || size > MAX_FRAME_BYTES) {
            throw new IggyConnectionError(`Iggy sent a frame of invalid size ${size}`);
          }
          if (buf.length < size) break;
          const header = buf.slice(0, HEADER_SIZE);
          const body = buf.slice(HEADER_SIZE, size);
          buf = buf.subarray(size);
          this.#deliver({ header, body });
        }
      }
    } catch (e) {
      if (e instanceof IggyConnectionError) throw e;
      const why = e instanceof Error ? e.message : String(e);
      throw new IggyConnectionError(`Iggy connection ${this.#label} failed: ${why}`, {
        cause: e,
      });
    } finally {
      reader.releaseLock();
    }
  }
}
