/**
 * Writes whole frames to a transport, one after another. Over a transport with `write` (a
 * Deno socket) it calls it directly, looping over short writes, and a frame starts only when
 * the one before it is out (a 0.12 connection has several requests in flight, whose frames
 * must not interleave); otherwise through the transport's `writable`. Why not always the
 * stream: a send through Iggy is one frame per batch, and the stream's writer added its own
 * promises and queue entries to each, a visible share of the gateway's CPU through Iggy.
 *
 * @module
 */

import type { Transport } from "./dial.ts";

/** The frame writer of one connection. */
export class FrameWriter {
  readonly #transport: Transport;
  readonly #write: ((bytes: Uint8Array) => Promise<number>) | undefined;
  #stream: WritableStreamDefaultWriter<Uint8Array> | undefined;
  /** Settles when the last frame queued so far is written (or failed). */
  #tail: Promise<void> = Promise.resolve();
  #pending = 0;

  constructor(transport: Transport) {
    this.#transport = transport;
    this.#write = transport.write;
    if (!this.#write) this.#stream = transport.writable.getWriter();
  }

  /** Resolves once `frame` is handed to the socket whole; rejects when the transport fails. */
  write(frame: Uint8Array): Promise<void> {
    if (this.#stream) return this.#stream.write(frame);
    const p = this.#pending === 0 ? this.#all(frame) : this.#tail.then(() => this.#all(frame));
    this.#pending++;
    const settled = p.finally(() => this.#pending--);
    this.#tail = settled.catch(() => {});
    return settled;
  }

  async #all(frame: Uint8Array): Promise<void> {
    let at = 0;
    while (at < frame.length) {
      const n = await this.#write!.call(this.#transport, at === 0 ? frame : frame.subarray(at));
      if (n <= 0) throw new Deno.errors.BrokenPipe("the socket took no bytes");
      at += n;
    }
  }

  /** Drops what is still queued (the stream's writer); a direct write ends with the socket. */
  abort(): Promise<void> {
    return this.#stream ? this.#stream.abort() : Promise.resolve();
  }

  /** Closes the stream's writer once its queue is written; direct: nothing left to do. */
  close(): Promise<void> {
    return this.#stream ? this.#stream.close() : Promise.resolve();
  }
}
