/**
 * The small packets: PINGREQ, DISCONNECT, and a CONNECT of a protocol level the gateway does
 * not speak. Each is an outcome; the connection sends it.
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import type { ClientPacket } from "../codec/packets.ts";
import {
  type CloseOutcome,
  type ConnackOutcome,
  type PingrespOutcome,
  refuseConnect,
} from "./outcome.ts";

/** A CONNECT of a protocol level the gateway does not speak. */
export type UnsupportedConnect = Extract<ClientPacket, { type: "connect_unsupported" }>;

const PINGRESP: PingrespOutcome = Object.freeze({ kind: "pingresp" });

const DISCONNECTED: CloseOutcome = Object.freeze({
  kind: "close",
  reason: "client disconnected",
  discardWill: true,
});

/** PINGREQ → PINGRESP (shared outcome: keep-alive traffic allocates nothing here). */
export function handlePingreq(): PingrespOutcome {
  return PINGRESP;
}

/** DISCONNECT: close once queued output is written; the will is discarded [MQTT-3.14.4-3]. */
export function handleDisconnect(): CloseOutcome {
  return DISCONNECTED;
}

/** [MQTT-3.1.2-2]: an unacceptable protocol level → CONNACK 1, then close. */
export function handleUnsupportedConnect(p: UnsupportedConnect): ConnackOutcome {
  return refuseConnect(
    ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION,
    `unsupported protocol ${p.protocolName} level ${p.level}`,
  );
}
