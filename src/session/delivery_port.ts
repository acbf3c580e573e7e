/**
 * What a connection asks of the delivery side (the way out), and what delivery
 * sees of a connection. Kept as an interface so the session does not import delivery.
 *
 * @module
 */
import type { QosFlowPacket, Subscription } from "../codec/packets.ts";
import type { OutgoingMessage, PartitionAddress, Principal } from "../log/port.ts";
import type { Outbox } from "./outbox.ts";
import type { V5Session } from "./v5_session.ts";
import type { ReplayFrom } from "./replay_from.ts";
import type { StoredSession } from "./stored_sessions.ts";
import type { SpanContext } from "@opentelemetry/api";

/** A connected client as delivery sees it. */
export interface Subscriber {
  readonly clientId: string;
  readonly principal: Principal;
  readonly outbox: Outbox;
  /** Trace context of the connection's span (null before CONNECT). */
  readonly spanContext: SpanContext | null;
  /** Closes the connection (eviction); the session then calls `detach`. */
  close(reason: string): void;
  /** Closes, telling an MQTT 5 client why (DISCONNECT `reasonCode`) first. */
  disconnect?(reasonCode: number, reason: string): void;
  /** MQTT 5 session state (receive maximum, maximum packet size); null or absent on 3.1.1. */
  readonly v5?: V5Session | null;
  /** The stored session (subscriptions and positions outlive the connection), or null. */
  readonly session: StoredSession | null;
}

/**
 * One filter of a SUBSCRIBE. `from` (MQTT 5's `iggy-from` user property, parsed by the session
 * with `parseReplayFrom`) starts it in the log's past, like a 3.1.1 `$replay/<from>/` prefix.
 */
export interface SubscribeRequest extends Subscription {
  readonly from?: ReplayFrom;
}

/** A client's acknowledgement of a copy (PUBREC and PUBCOMP: of a QoS 2 copy). */
export type AckPacket =
  | { readonly type: "puback"; readonly packetId: number }
  | QosFlowPacket<"pubrec">
  | QosFlowPacket<"pubcomp">;

/** A client's acknowledgement of a copy: PUBACK, PUBREC or PUBCOMP. */
export function isAck(p: { readonly type: string }): p is AckPacket {
  return p.type === "puback" || p.type === "pubrec" || p.type === "pubcomp";
}

/** Delivery operations a session performs. */
export interface DeliveryPort {
  /**
   * S1–S5; resolves with one SUBACK return code per filter (0, 1 or 0x80). MQTT 5 filters carry
   * their subscription options (No Local, Retain As Published, identifier), kept with the
   * subscription for routing.
   */
  subscribe(sub: Subscriber, subscriptions: readonly SubscribeRequest[]): Promise<number[]>;
  /**
   * Removes the client's subscriptions to these filters. Returns, per filter, whether a
   * subscription existed (MQTT 5 UNSUBACK 0x11).
   */
  unsubscribe(sub: Subscriber, filters: readonly string[]): boolean[];
  /** How many subscriptions the client holds, and whether it holds one to `filter`. */
  subscriptionsOf(sub: Subscriber): { count: number; has(filter: string): boolean };
  /**
   * The SUBACK of the client's last SUBSCRIBE is queued: the retained messages its new
   * subscriptions are owed go out now, after it.
   */
  afterSuback(sub: Subscriber): void;
  /** A PUBACK from the client settles its ack-ledger entry. */
  puback(sub: Subscriber, packetId: number): void;
  /**
   * Any acknowledgement: a PUBACK as {@link puback}; a PUBREC settles a QoS 2 copy's entry and
   * is answered with PUBREL; a PUBCOMP frees the copy's packet id [MQTT-4.3.3].
   */
  acknowledged(sub: Subscriber, p: AckPacket): void;
  /**
   * The client is gone: strike its pending copies, drop its subscriptions. A stored session's
   * positions (the first offset it has not settled, per triple) are stored first.
   */
  detach(sub: Subscriber): void;
  /**
   * A stored session was resumed: its subscriptions are restored, each triple from the
   * session's stored position (catching up on what was published meanwhile).
   */
  resume(sub: Subscriber): Promise<void>;
  /**
   * Whether {@link notifyAppended} would use the messages of an append to `address` made now
   * (a reader of its partition, or a wildcard subscription, exists). When not, and the backend
   * lets go of them once encoded, the session drops them at once and later notifies with none.
   */
  wantsAppended(address: PartitionAddress & { readonly balancedOver?: number }): boolean;
  /**
   * This gateway confirmed an append to a partition at `baseOffset` (null when the backend
   * did not say): its reader may route the messages at once or poll. `messages` is empty when
   * the session dropped them ({@link wantsAppended}): the reader then polls.
   */
  notifyAppended(
    address: PartitionAddress,
    baseOffset: number | null,
    messages: readonly OutgoingMessage[],
  ): void;
}
