/**
 * What a connection asks of the delivery side (the way out, DESIGN §4), and what delivery
 * sees of a connection. Kept as an interface so the session does not import delivery.
 *
 * @module
 */
import type { Subscription } from "../codec/packets.ts";
import type { OutgoingMessage, PartitionAddress, Principal } from "../log/port.ts";
import type { Outbox } from "./outbox.ts";
import type { V5Session } from "./v5_session.ts";
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
}

/** Delivery operations a session performs. */
export interface DeliveryPort {
  /**
   * S1–S5; resolves with one SUBACK return code per filter (0, 1 or 0x80). MQTT 5 filters carry
   * their subscription options (No Local, Retain As Published, identifier), kept with the
   * subscription for routing.
   */
  subscribe(sub: Subscriber, subscriptions: readonly Subscription[]): Promise<number[]>;
  /**
   * Removes the client's subscriptions to these filters. Returns, per filter, whether a
   * subscription existed (MQTT 5 UNSUBACK 0x11), when the implementation knows.
   */
  unsubscribe(sub: Subscriber, filters: readonly string[]): void | boolean[];
  /** How many subscriptions the client holds, and whether it holds one to `filter`. */
  subscriptionsOf?(sub: Subscriber): { count: number; has(filter: string): boolean };
  /** Wildcard filters are resolved (issue 18); absent or false: MQTT 5 SUBACK 0xA2 for them. */
  readonly wildcards?: boolean;
  /** A PUBACK from the client settles its ack-ledger entry. */
  puback(sub: Subscriber, packetId: number): void;
  /** The client is gone: strike its pending copies, drop its subscriptions. */
  detach(sub: Subscriber): void;
  /**
   * This gateway confirmed an append to a partition at `baseOffset` (null when the backend
   * did not say): its reader may route the messages at once or poll.
   */
  notifyAppended(
    address: PartitionAddress,
    baseOffset: number | null,
    messages: readonly OutgoingMessage[],
  ): void;
}
