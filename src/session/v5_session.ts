/**
 * What an MQTT 5 connection keeps of its CONNECT for its lifetime (made by `connect_v5.ts`,
 * read by the publisher, the wire and the delivery).
 *
 * @module
 */

/** MQTT 5 session state of one connection. */
export interface V5Session {
  /** The client's Receive Maximum: QoS 1 deliveries in flight to it at most [MQTT-3.3.4-9]. */
  readonly receiveMaximum: number;
  /** The client's Maximum Packet Size (bytes); Infinity when it set none [MQTT-3.1.2-24]. */
  readonly maximumPacketSize: number;
  /** Reason strings and user properties may go on PUBACK/SUBACK/… [MQTT-3.1.2-29]. */
  readonly problemInformation: boolean;
  /** The session expiry the CONNACK granted (s). */
  readonly sessionExpiry: number;
  /** `mqtt5.puback_coordinates`, and the client asked for problem information [MQTT-3.1.2-29]. */
  readonly pubackCoordinates: boolean;
  /** Topic aliases toward the client: min(its Topic Alias Maximum, our bound); 0 = none. */
  readonly topicAliasesOut: number;
}
