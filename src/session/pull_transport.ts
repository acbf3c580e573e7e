/**
 * A push-style {@link Transport} over a source that reads by pulling (`Deno.Conn`,
 * `Deno.TlsConn`): one read loop per connection that waits while paused. Plain TCP does not
 * need it (node:net pushes, and an idle socket then holds no pending read: ~2 KB less per
 * connection); TLS does.
 *
 * @module
 */
import type { Transport, TransportSink } from "./transport.ts";

/**
 * Read buffer sizes of a pull-style source: small while idle (memory per connection), larger
 * when busy.
 */
export const READ_BUFFER_IDLE = 512;
export const READ_BUFFER_BUSY = 65536;

/** A source that reads by pulling (`Deno.Conn`, `Deno.TlsConn`). */
export interface PullSource {
  readonly remoteAddress: string;
  /** Reads into `buf`; resolves with the byte count, or null at end of stream. */
  read(buf: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  close(): void;
}

/**
 * A push-style {@link Transport} over a pull-style source: one read loop that waits while
 * paused. The buffer grows while reads fill it and shrinks back once the client is quiet, so
 * an idle connection holds only the small one; a chunk is valid during `data()` only.
 */
export function pullTransport(source: PullSource): Transport {
  let sink: TransportSink | null = null;
  let paused = false;
  let wake: (() => void) | null = null;
  const loop = async (s: TransportSink) => {
    let buf = new Uint8Array(READ_BUFFER_IDLE);
    try {
      for (;;) {
        while (paused) await new Promise<void>((r) => wake = r);
        const n = await source.read(buf);
        if (n === null) break;
        s.data(buf.subarray(0, n));
        if (n === buf.length && buf.length < READ_BUFFER_BUSY) {
          buf = new Uint8Array(READ_BUFFER_BUSY);
        } else if (n <= READ_BUFFER_IDLE && buf.length > READ_BUFFER_IDLE) {
          buf = new Uint8Array(READ_BUFFER_IDLE);
        }
      }
      s.end();
    } catch (err) {
      s.end(err);
    }
  };
  return {
    remoteAddress: source.remoteAddress,
    start(s) {
      if (sink !== null) return;
      sink = s;
      loop(s);
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      const w = wake;
      wake = null;
      w?.();
    },
    write: (bytes) => source.write(bytes),
    close: () => source.close(),
  };
}
