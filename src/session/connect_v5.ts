/**
 * MQTT 5 CONNECT and CONNACK: what the gateway refuses before any login
 * (enhanced authentication), the session state a v5 connection keeps
 * (the client's receive maximum and maximum packet size, problem information), and the CONNACK
 * properties, which promise only what the gateway implements.
 *
 * Stored sessions and wildcards: {@link grantedSessionExpiry} grants a stored session
 * up to `session.max_expiry_s`, and `WILDCARDS_AVAILABLE` says wildcard filters are resolved.
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import { PropertyWriter } from "../codec/encode_v5.ts";
import type { ConnectPacket } from "../codec/packets.ts";
import { Prop } from "../codec/properties.ts";
import type { GatewayConfig } from "../config/types.ts";
import { type ConnackOutcome, refuseConnect } from "./outcome.ts";
import { refuseContent5 } from "./publish_v5.ts";
import type { V5Session } from "./v5_session.ts";

/** MQTT 5 CONNACK reason codes [MQTT-3.2.2.2] the gateway sends. */
export const Connack5 = {
  SUCCESS: 0x00,
  UNSUPPORTED_PROTOCOL_VERSION: 0x84,
  CLIENT_ID_NOT_VALID: 0x85,
  BAD_USER_NAME_OR_PASSWORD: 0x86,
  NOT_AUTHORIZED: 0x87,
  SERVER_UNAVAILABLE: 0x88,
  BAD_AUTHENTICATION_METHOD: 0x8c,
  QUOTA_EXCEEDED: 0x97,
  PAYLOAD_FORMAT_INVALID: 0x99,
  QOS_NOT_SUPPORTED: 0x9b,
  CONNECTION_RATE_EXCEEDED: 0x9f,
} as const;

/** The 3.1.1 return codes the handlers decide, as MQTT 5 reason codes. */
const FROM_V3: Readonly<Record<number, number>> = {
  [ConnackCode.ACCEPTED]: Connack5.SUCCESS,
  [ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION]: Connack5.UNSUPPORTED_PROTOCOL_VERSION,
  [ConnackCode.IDENTIFIER_REJECTED]: Connack5.CLIENT_ID_NOT_VALID,
  [ConnackCode.SERVER_UNAVAILABLE]: Connack5.SERVER_UNAVAILABLE,
  [ConnackCode.BAD_USERNAME_OR_PASSWORD]: Connack5.BAD_USER_NAME_OR_PASSWORD,
  [ConnackCode.NOT_AUTHORIZED]: Connack5.NOT_AUTHORIZED,
};

/** The MQTT 5 reason code of a CONNACK outcome. */
export function connackReason5(o: ConnackOutcome): number {
  return o.reasonCode5 ?? FROM_V3[o.code] ?? Connack5.NOT_AUTHORIZED;
}

/** Wildcard Subscription Available: the delivery resolves wildcard filters. */
export const WILDCARDS_AVAILABLE = true;

/**
 * The session expiry the gateway grants (s): what the client asked, capped by
 * `session.max_expiry_s` (0xFFFFFFFF, "never", too). More than 0 makes a stored session
 * (`session_request.ts`); 0 ends the session with the connection.
 */
export function grantedSessionExpiry(requested: number, maxS: number): number {
  return Math.min(requested, maxS);
}

/** Refusals of an MQTT 5 CONNECT decided before any login, or null. */
export function refuseConnect5(p: ConnectPacket): ConnackOutcome | null {
  const props = p.properties;
  if (props?.authenticationMethod !== undefined) {
    // No enhanced authentication (AUTH) [MQTT-4.12.0-1].
    return refuse5(
      Connack5.BAD_AUTHENTICATION_METHOD,
      `authentication method "${props.authenticationMethod}" is not supported`,
    );
  }
  if (p.will?.properties !== undefined) {
    const why = refuseContent5({ ...p.will, type: "publish", qos: 0, dup: false, packetId: 0 });
    if (why !== null) return refuse5(Connack5.PAYLOAD_FORMAT_INVALID, `will: ${why.reason}`);
  }
  return null;
}

function refuse5(code: number, reason: string): ConnackOutcome {
  return { ...refuseConnect(ConnackCode.NOT_AUTHORIZED, reason), reasonCode5: code };
}

/** The state an accepted MQTT 5 connection keeps. */
export function v5SessionOf(config: GatewayConfig, p: ConnectPacket): V5Session {
  const props = p.properties ?? {};
  const problemInformation = props.requestProblemInformation !== 0;
  return {
    receiveMaximum: props.receiveMaximum ?? 65_535,
    maximumPacketSize: props.maximumPacketSize ?? Infinity,
    problemInformation,
    sessionExpiry: grantedSessionExpiry(props.sessionExpiry ?? 0, config.session.max_expiry_s),
    // The coordinates are user properties, which a PUBACK may carry only when the client
    // asked for problem information [MQTT-3.1.2-29].
    pubackCoordinates: problemInformation && wantsCoordinates(config, p),
    topicAliasesOut: Math.min(props.topicAliasMaximum ?? 0, config.limits.max_topic_aliases_out),
  };
}

/** The CONNECT user property a client asks for log coordinates in its PUBACKs with. */
export const COORDINATES_REQUEST = "iggy-coordinates";

/**
 * `mqtt5.puback_coordinates`: `on_request` only for a client whose CONNECT says
 * `iggy-coordinates = 1` (the ~90 bytes go only to who asked: a metered link pays for each, and
 * strict clients refuse a PUBACK with properties), `always`, or `never`.
 */
function wantsCoordinates(config: GatewayConfig, p: ConnectPacket): boolean {
  const mode = config.mqtt5.puback_coordinates;
  if (mode !== "on_request") return mode === "always";
  return p.properties?.userProperties?.some(([k, v]) => k === COORDINATES_REQUEST && v === "1") ===
    true;
}

/** What the CONNACK of an accepted MQTT 5 CONNECT tells about the session. */
export interface AcceptedFacts {
  /** The id the gateway assigned to an empty client id, or null. */
  readonly assignedClientId: string | null;
  /** The keep-alive the gateway uses when it differs from the client's (s), or null. */
  readonly serverKeepAlive: number | null;
  readonly requestedSessionExpiry: number;
  readonly session: V5Session;
}

/** CONNACK properties [MQTT-3.2.2.3]: the capabilities, and what was changed from the ask. */
export function connackProperties(config: GatewayConfig, f: AcceptedFacts): PropertyWriter {
  const l = config.limits;
  const w = new PropertyWriter();
  if (f.requestedSessionExpiry !== f.session.sessionExpiry) {
    w.u32(Prop.SESSION_EXPIRY, f.session.sessionExpiry);
  }
  w.u16(Prop.RECEIVE_MAXIMUM, Math.min(65_535, l.max_inflight_publishes_per_client));
  // No Maximum QoS property: QoS 2 is supported both ways [MQTT-3.2.2.3.4].
  // No Retain Available property: retained messages are supported (1 is its default).
  // Our cap is on the remaining length; a packet of that total size is always under it.
  w.u32(Prop.MAXIMUM_PACKET_SIZE, l.max_packet_bytes);
  if (f.assignedClientId !== null) w.string(Prop.ASSIGNED_CLIENT_ID, f.assignedClientId);
  w.u16(Prop.TOPIC_ALIAS_MAXIMUM, l.max_topic_aliases);
  w.byte(Prop.WILDCARD_SUB_AVAILABLE, WILDCARDS_AVAILABLE ? 1 : 0);
  w.byte(Prop.SUB_ID_AVAILABLE, 1);
  // No Shared Subscription Available property: shared subscriptions are supported (default 1).
  if (f.serverKeepAlive !== null) w.u16(Prop.SERVER_KEEP_ALIVE, f.serverKeepAlive);
  return w;
}
