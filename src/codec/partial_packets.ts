/**
 * The bound on bytes held in partly received packets, every connection together
 * (`limits.max_partial_packet_bytes_total`). `limits.max_packet_bytes` bounds one connection's
 * held packet; this bounds their sum, so a large per-packet limit does not let thousands of
 * slow senders, each stopping part-way through a large packet, hold that much memory each.
 *
 * Decoders take bytes as they hold them and give them back when the packet is whole or the
 * connection closes. A read that would take the total past the bound is refused: the decoder
 * throws {@link PartialPacketsFullError} and its connection is closed (MQTT 5: DISCONNECT 0x89
 * Server busy), the bytes it held are given back, and the other connections go on. Closing
 * rather than pausing: a paused connection keeps what it holds, so a budget filled by stalled
 * senders would pause every other large sender until keep-alive closed the stalled ones.
 *
 * @module
 */
import { ProtocolError } from "./errors.ts";

/** MQTT 5 reason code 0x89 Server busy. */
const SERVER_BUSY = 0x89;

/** Bytes held by every decoder for packets not yet whole, and their bound. */
export class PartialPacketBudget {
  /** Bytes held now, all connections together. */
  held = 0;

  constructor(readonly max: number) {}

  /** Takes `n` bytes; false, taking nothing, when the total would pass {@link max}. */
  take(n: number): boolean {
    if (this.held + n > this.max) return false;
    this.held += n;
    return true;
  }

  /** Gives back `n` bytes taken before. */
  give(n: number): void {
    this.held -= n;
  }
}

/** A read refused by the {@link PartialPacketBudget}: its connection is closed. */
export class PartialPacketsFullError extends ProtocolError {
  constructor(wanted: number, budget: PartialPacketBudget) {
    super(
      "server-limit",
      `Partly received packets hold ${budget.held} bytes; ${wanted} more would pass limits.max_partial_packet_bytes_total ${budget.max}`,
      SERVER_BUSY,
    );
    this.name = "PartialPacketsFullError";
  }
}
