/**
 * A violation of MQTT 3.1.1 by the peer. The connection that sent it is closed and the
 * `rejected` outcome counted. `rule` cites the conformance statement, e.g. "MQTT-3.3.1-4".
 */
export class ProtocolError extends Error {
  readonly code = "protocol_violation";
  readonly rule: string;
  /** Type of the offending packet when known (3 = PUBLISH, counted as a `rejected` publish). */
  packetType = 0;
  constructor(rule: string, message: string) {
    super(`${message} [${rule}]`);
    this.name = "ProtocolError";
    this.rule = rule;
  }
}
