/**
 * CONNECT decoding [MQTT-3.1]: protocol name and level, connect flags, keep-alive, then the
 * payload (client id, will, username, password) in that order.
 *
 * @module
 */
import { checkTopicName, type DecoderLimits, Reader } from "./_fields.ts";
import { ProtocolError } from "./errors.ts";
import type {
  ClientPacket,
  ConnectPacket,
  ConnectProperties,
  Will,
  WillProperties,
} from "./packets.ts";
import { ALLOWED, readProperties } from "./properties.ts";

/** The protocol levels a listener may speak (`listeners.mqtt_versions`). */
export interface ProtocolLevels {
  readonly v4: boolean;
  readonly v5: boolean;
}

const BOTH: ProtocolLevels = { v4: true, v5: true };

export function decodeConnect(
  b: Uint8Array,
  start: number,
  end: number,
  limits: DecoderLimits,
  levels: ProtocolLevels = BOTH,
): ClientPacket {
  const r = new Reader(b, start, end);
  const protocolName = r.string();
  const level = r.u8();
  const v5 = protocolName === "MQTT" && level === 5 && levels.v5;
  if (!(protocolName === "MQTT" && ((level === 4 && levels.v4) || v5))) {
    if (protocolName === "MQTT" || (protocolName === "MQIsdp" && level === 3)) {
      return { type: "connect_unsupported", protocolName, level };
    }
    throw new ProtocolError("MQTT-3.1.2-1", `Unknown protocol name "${protocolName}"`);
  }
  if (!v5) return readConnectRest(r, protocolName, level, false, limits);
  try {
    return readConnectRest(r, protocolName, level, true, limits);
  } catch (err) {
    // Read far enough to know it is MQTT 5: the client is told with a CONNACK [MQTT-4.13.1].
    if (err instanceof ProtocolError) err.inV5Connect = true;
    throw err;
  }
}

/** A CONNECT after its protocol name and level. */
function readConnectRest(
  r: Reader,
  protocolName: string,
  level: number,
  v5: boolean,
  limits: DecoderLimits,
): ClientPacket {
  const flags = r.u8();
  if (flags & 0x01) throw new ProtocolError("MQTT-3.1.2-3", "CONNECT reserved flag is set");
  const cleanSession = (flags & 0x02) !== 0;
  const willFlag = (flags & 0x04) !== 0;
  const willQos = (flags >> 3) & 0x03;
  const willRetain = (flags & 0x20) !== 0;
  const hasPassword = (flags & 0x40) !== 0;
  const hasUsername = (flags & 0x80) !== 0;
  if (!willFlag && (willQos !== 0 || willRetain)) {
    throw new ProtocolError("MQTT-3.1.2-11", "Will QoS or retain set without the will flag");
  }
  if (willQos === 3) throw new ProtocolError("MQTT-3.1.2-14", "Will QoS 3");
  // MQTT 5 allows a password without a user name [MQTT-3.1.2.9]; 3.1.1 does not.
  if (!v5 && !hasUsername && hasPassword) {
    throw new ProtocolError("MQTT-3.1.2-22", "Password flag set without username flag");
  }
  const keepAliveSeconds = r.u16();
  const maxUser = limits.maxUserProperties;
  const properties = v5
    ? readProperties(r, ALLOWED.CONNECT, "CONNECT", maxUser) as ConnectProperties
    : undefined;
  const clientId = r.string();
  const will = willFlag ? readWill(r, limits, willQos as 0 | 1 | 2, willRetain, v5) : null;
  const username = hasUsername ? r.string() : null;
  const password = hasPassword ? r.bytes() : null;
  if (r.left !== 0) throw new ProtocolError("MQTT-3.1.3", "Unexpected bytes after CONNECT payload");
  const p: ConnectPacket = {
    type: "connect",
    protocolName,
    protocolLevel: level,
    cleanSession,
    keepAliveSeconds,
    clientId,
    will,
    username,
    password,
  };
  return properties === undefined ? p : { ...p, properties };
}

/** The will of a CONNECT payload: MQTT 5 properties, topic, payload [MQTT-3.1.3.2–4]. */
function readWill(
  r: Reader,
  limits: DecoderLimits,
  qos: 0 | 1 | 2,
  retain: boolean,
  v5: boolean,
): Will {
  const properties = v5
    ? readProperties(r, ALLOWED.WILL, "CONNECT will", limits.maxUserProperties) as WillProperties
    : undefined;
  const topic = r.string();
  checkTopicName(topic, limits);
  const will: Will = { topic, payload: r.bytes(), qos, retain };
  return properties === undefined ? will : { ...will, properties };
}
