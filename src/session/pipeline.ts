/**
 * The first stages of a connection's pipeline: bytes in (a {@link Transport} pushing chunks,
 * or {@link pullTransport} turning a pull-style reader into one) and `decodePackets` (chunks →
 * batches of packets). The connection consumes the packet batches and runs authorize → map →
 * append on each.
 *
 * Stages pass whole reads, not single packets, so the per-stage cost is shared by every packet
 * in the read. The read stage used to be an async generator; measured, that cost ~1.4 KB per
 * idle connection and a pending read promise another ~2 KB, so the plain TCP listener pushes
 * (node:net) and only pull-style sources keep a read loop, here.
 *
 * @module
 */
import type { PacketDecoder } from "../codec/decoder.ts";
import type { ClientPacket } from "../codec/packets.ts";
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

/**
 * Decodes chunks into the packets each one completes (bounded by the decoder's limits).
 * A plain (sync) mapping step: an async generator here costs ~1.4 KB per idle connection.
 */
export function decodePackets(chunk: Uint8Array, decoder: PacketDecoder): ClientPacket[] {
  return decoder.push(chunk);
}
