/**
 * A QoS 1 or 2 copy held by a client queue (waiting for a window slot, or in flight), and its
 * encoding as a PUBLISH; `Q` is the client queue (`client_queue.ts` names the types it holds).
 *
 * @module
 */
import { encodePublish } from "../codec/encoder.ts";
import type { MqttView } from "../stored/envelope.ts";
import type { StoredMessage } from "../log/port.ts";
import type { AckLedger, LedgerEntry } from "./ledger.ts";
import type { ShareGroup } from "./registry.ts";

/** A QoS 1 or 2 copy awaiting a window slot or a PUBACK (QoS 2: a PUBREC). */
export interface CopyOf<Q> {
  readonly qos: 1 | 2;
  readonly topicBytes: Uint8Array;
  readonly payload: Uint8Array;
  readonly ledger: AckLedger;
  readonly entry: LedgerEntry;
  readonly bytes: number;
  /** MQTT 5 property block of this copy; null or absent for a 3.1.1 subscriber. */
  readonly props?: Uint8Array | null;
  /** RETAIN flag (MQTT 5 Retain As Published). */
  readonly retain?: boolean;
  /** Triple key of the message (a stored session's position per triple). */
  readonly key: string;
  /** A shared subscription's copy: what another member needs if this one goes away. */
  readonly shared?: SharedCopyOf<Q>;
}

/** The group and message of a shared subscription's copy (`share/groups.ts`). */
export interface SharedCopyOf<Q> {
  readonly group: ShareGroup<Q>;
  readonly m: StoredMessage;
  readonly view: MqttView;
}

/** A QoS 1 or 2 copy as a PUBLISH with packet id `id`. */
export function encodeCopy(copy: CopyOf<unknown>, id: number, dup: boolean): Uint8Array {
  return encodePublish(
    copy.topicBytes,
    copy.payload,
    copy.qos,
    id,
    dup,
    copy.retain ?? false,
    copy.props ?? null,
  );
}
