/**
 * What a stored session keeps of its QoS 2 copies in flight while the client is away, so that
 * after a reconnect both exchanges are taken up under their original packet ids [MQTT-4.4.0-1]:
 * a copy the client PUBRECed gets its PUBREL again; a copy sent but not PUBRECed comes again
 * from the log as a PUBLISH under its packet id with DUP set, so a client that already has it
 * does not take it twice. Bounded by the in-flight window. Memory only (see `StoredSession`).
 *
 * @module
 */

/** A stored session's QoS 2 copies in flight at disconnect. */
export interface Qos2Out {
  /** Packet ids PUBRECed whose PUBCOMP had not come. */
  readonly releasing: readonly number[];
  /** Packet ids of copies sent but not PUBRECed, by {@link copyAt} (triple key and offset). */
  readonly sent: ReadonlyMap<string, number>;
}

/** The key of a copy in {@link Qos2Out.sent}: the message's triple key and offset. */
export function copyAt(tripleKey: string, offset: number): string {
  return `${tripleKey}\u0000${offset}`;
}
