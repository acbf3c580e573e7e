/**
 * The first stages of a connection's pipeline, as async-iterator stream transforms:
 * `readChunks` (transport → byte chunks, with back-pressure and an adaptive buffer) and
 * `decodePackets` (chunks → batches of packets). The connection consumes the packet batches
 * and runs authorize → map → append on each.
 *
 * Stages pass whole reads, not single packets, so the per-stage cost (one promise per read)
 * is shared by every packet in the read.
 *
 * @module
 */
import type { PacketDecoder } from "../codec/decoder.ts";
import type { ClientPacket } from "../codec/packets.ts";
import type { Transport } from "./transport.ts";

/**
 * Read buffer sizes: small while idle (memory per connection: measured here, a bare Deno
 * server holding a pending 512-byte read costs ~8.2 KB of RSS per socket), larger when busy.
 */
export const READ_BUFFER_IDLE = 512;
export const READ_BUFFER_BUSY = 65536;

/**
 * Yields what the transport delivers. Before each read it awaits `gate()`, which holds the
 * socket unread while the connection (or the whole gateway) has too much waiting for the
 * backend — back-pressure reaches the client's TCP window instead of our memory.
 * A yielded chunk is valid until the next iteration (the buffer is reused).
 */
export async function* readChunks(
  t: Transport,
  gate: () => Promise<void> | undefined,
): AsyncGenerator<Uint8Array> {
  let buf = new Uint8Array(READ_BUFFER_IDLE);
  for (;;) {
    const wait = gate();
    if (wait !== undefined) await wait;
    const n = await t.read(buf);
    if (n === null) return;
    yield buf.subarray(0, n);
    // Grow while reads fill the buffer; shrink back once the client is quiet again, so an
    // idle connection holds only the small buffer.
    if (n === buf.length && buf.length < READ_BUFFER_BUSY) buf = new Uint8Array(READ_BUFFER_BUSY);
    else if (n <= READ_BUFFER_IDLE && buf.length > READ_BUFFER_IDLE) {
      buf = new Uint8Array(READ_BUFFER_IDLE);
    }
  }
}

/**
 * Decodes chunks into the packets each one completes (bounded by the decoder's limits).
 * A plain (sync) mapping step: an async generator here costs ~1.4 KB per idle connection.
 */
export function decodePackets(
  chunk: Uint8Array,
  decoder: PacketDecoder,
  onChunk: (bytes: number) => void,
): ClientPacket[] {
  onChunk(chunk.length);
  return decoder.push(chunk);
}
