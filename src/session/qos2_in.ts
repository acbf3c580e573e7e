/**
 * The packet ids of one connection's QoS 2 publishes [MQTT-4.3.3], in two sets: those being
 * appended on this connection, and those appended (PUBRECed) whose PUBREL has not come. The
 * second is the stored session's when there is one, so a client that reconnects may resend a
 * PUBLISH or its PUBREL and find it there. An id enters that set only once its message is in
 * the log: a resend that finds it gets a PUBREC and no second append, and a message whose
 * append fails is never answered as if stored (a resend is appended then). A resend of an id
 * still being appended on this connection is dropped: its PUBREC is on the way. A resend that
 * reaches a new connection while the old one's append is in flight is appended again (at least
 * once, never lost).
 *
 * @module
 */
import { PacketIdSet } from "./packet_ids.ts";

/** What to do with a QoS 2 PUBLISH under a packet id. */
export type Qos2Arrival = "new" | "appended" | "appending";

/** One connection's QoS 2 packet ids. */
export class Qos2Inbound {
  readonly #appending = new PacketIdSet();
  readonly #appended: PacketIdSet;

  /** `held`: the stored session's set of appended ids (null: the connection keeps its own). */
  constructor(held: PacketIdSet | null) {
    this.#appended = held ?? new PacketIdSet();
  }

  /** A QoS 2 PUBLISH arrived under `id`; "new" marks it as being appended. */
  arrived(id: number): Qos2Arrival {
    if (this.#appended.has(id)) return "appended";
    return this.#appending.add(id) ? "new" : "appending";
  }

  /** Its append is confirmed: the id is held until the PUBREL. */
  appended(id: number): void {
    this.#appending.delete(id);
    this.#appended.add(id);
  }

  /** Refused or failed: not in the log, so a resend under the id is a new message. */
  notAppended(id: number): void {
    this.#appending.delete(id);
  }

  /** Ids PUBRECed whose PUBREL has not come (their PUBCOMP is owed). */
  get awaitingRelease(): number {
    return this.#appended.size;
  }

  /** PUBREL: the id is free again; false when it was not held. */
  released(id: number): boolean {
    return this.#appended.delete(id);
  }
}
