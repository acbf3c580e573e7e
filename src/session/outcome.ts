/**
 * What a packet handler decides, as a value. Handlers (`connect.ts`, `subscribe.ts`,
 * `control.ts`) return outcomes; the connection's `act()` is the one place that turns them into
 * wire actions (encode, outbox push, close) and counters. Encoding lives there, not in the
 * handlers, so a second protocol version (MQTT 5 reason codes and properties) changes one
 * place.
 *
 * PUBLISH is the exception, for speed: the QoS 0/1 fast path allocates no outcome object per
 * message (`connection_publisher.ts` and `appender.ts` count `appended | acked | rejected |
 * denied | failed` themselves, and its PUBACKs go from the appender's ack queue into the outbox).
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import type { PropertyWriter } from "../codec/encode_v5.ts";

/** A CONNACK return code (MQTT 3.1.1 §3.2.2.3). */
export type ConnackReturnCode = typeof ConnackCode[keyof typeof ConnackCode];

/** Answer a CONNECT: `code` 0 accepts; any other code refuses and closes once written. */
export interface ConnackOutcome {
  readonly kind: "connack";
  readonly code: ConnackReturnCode;
  /** Why it was refused (logs and close reason); "" when accepted. */
  readonly reason: string;
  /** MQTT 5: a reason code with no 3.1.1 equivalent (e.g. 0x8C); else mapped from `code`. */
  readonly reasonCode5?: number;
  /** MQTT 5: the CONNACK properties of an accepted CONNECT. */
  readonly properties5?: PropertyWriter;
  /** Answer in the MQTT 5 format although the connection is not v5 (a refused v5 CONNECT). */
  readonly format5?: boolean;
  /** MQTT 5: the client's Maximum Packet Size; a reason string that would pass it is left out. */
  readonly maxPacketSize5?: number;
  /** A refusal's detail for the log line only: never sent to the client. */
  readonly logFields?: Readonly<Record<string, unknown>>;
  /** Accepted with a stored session resumed [MQTT-3.2.2-2]. */
  readonly sessionPresent?: boolean;
}

/** Answer a SUBSCRIBE with one return code per filter (0, 1 or 0x80; MQTT 5 reason codes). */
export interface SubackOutcome {
  readonly kind: "suback";
  readonly packetId: number;
  readonly codes: readonly number[];
  /** Runs once the SUBACK is queued: the new subscriptions' retained messages follow it. */
  readonly after?: () => void;
}

/** Answer an UNSUBSCRIBE (MQTT 5: one reason code per filter, 0 or 0x11). */
export interface UnsubackOutcome {
  readonly kind: "unsuback";
  readonly packetId: number;
  readonly codes?: readonly number[];
}

/** Answer a PINGREQ. */
export interface PingrespOutcome {
  readonly kind: "pingresp";
}

/** Close the connection once what is queued has been written. */
export interface CloseOutcome {
  readonly kind: "close";
  readonly reason: string;
  /** DISCONNECT discards the will [MQTT-3.14.4-3]; other closes publish it. */
  readonly discardWill: boolean;
}

/** Every outcome a handler can return. */
export type Outcome =
  | ConnackOutcome
  | SubackOutcome
  | UnsubackOutcome
  | PingrespOutcome
  | CloseOutcome;

/** CONNACK 0 (shared: nothing to allocate per accepted CONNECT). */
export const CONNACK_ACCEPTED: ConnackOutcome = Object.freeze({
  kind: "connack",
  code: ConnackCode.ACCEPTED,
  reason: "",
});

/** A refused CONNECT. */
export function refuseConnect(code: ConnackReturnCode, reason: string): ConnackOutcome {
  return { kind: "connack", code, reason };
}
