/** MQTT 5 reason code 0x81 Malformed Packet. */
export const REASON_MALFORMED = 0x81;
/** MQTT 5 reason code 0x82 Protocol Error. */
export const REASON_PROTOCOL_ERROR = 0x82;

/**
 * A violation of MQTT by the peer. The connection that sent it is closed and the `rejected`
 * outcome counted. `rule` cites the conformance statement, e.g. "MQTT-3.3.1-4". An MQTT 5
 * connection is first told why: DISCONNECT with `reasonCode` (0x81 malformed packet unless the
 * error says otherwise, e.g. 0x82 protocol error, 0x95 packet too large).
 */
export class ProtocolError extends Error {
  readonly code = "protocol_violation";
  readonly rule: string;
  /** Type of the offending packet when known (3 = PUBLISH, counted as a `rejected` publish). */
  packetType = 0;
  /** MQTT 5 DISCONNECT reason code for this violation. */
  readonly reasonCode: number;
  /** Raised reading an MQTT 5 CONNECT: answered with CONNACK `reasonCode` [MQTT-4.13.1]. */
  inV5Connect = false;
  /** The message without the rule, for the DISCONNECT reason string. */
  readonly reason: string;
  constructor(rule: string, message: string, reasonCode = REASON_MALFORMED) {
    super(`${message} [${rule}]`);
    this.name = "ProtocolError";
    this.rule = rule;
    this.reasonCode = reasonCode;
    this.reason = message;
  }
}
