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

const DISCONNECTED_WITH_WILL: CloseOutcome = Object.freeze({
  kind: "close",
  reason: "client disconnected with will message (0x04)",
  discardWill: false,
});

/**
 * DISCONNECT: close once queued output is written; the will is discarded [MQTT-3.14.4-3],
 * unless an MQTT 5 client asked for it with reason code 0x04 [MQTT-3.14.2.1].
 */
export function handleDisconnect(reasonCode = 0): CloseOutcome {
  return reasonCode === 0x04 ? DISCONNECTED_WITH_WILL : DISCONNECTED;
}

/**
 * [MQTT-3.1.2-2]: an unacceptable protocol level → CONNACK 1, then close. An MQTT 5 CONNECT
 * (the listener does not speak 5) gets an MQTT 5 CONNACK 0x84 [MQTT-3.1.2-2, v5].
 */
export function handleUnsupportedConnect(p: UnsupportedConnect): ConnackOutcome {
  const o = refuseConnect(
    ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION,
    `unsupported protocol ${p.protocolName} level ${p.level}`,
  );
  return p.protocolName === "MQTT" && p.level === 5 ? { ...o, format5: true } : o;
}
