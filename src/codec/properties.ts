/**
 * MQTT 5 properties [MQTT-2.2.2]: decoding with the rules every packet shares — which
 * properties a packet type may carry, which may not repeat, the values each may take, and
 * bounds (the property length inside the packet, user properties per packet).
 *
 * A property that is not allowed in the packet, or a property block that overruns the packet,
 * is a Malformed Packet (0x81); a repeated property or a forbidden value is a Protocol Error
 * (0x82) [MQTT-2.2.2-2, 3.1.2-…]. More user properties than `limits.max_user_properties` is
 * DISCONNECT 0x95 (the bound on what one packet may make the gateway hold).
 *
 * @module
 */
import { Reader } from "./_fields.ts";
import { ProtocolError, REASON_MALFORMED, REASON_PROTOCOL_ERROR } from "./errors.ts";

/** Property identifiers [MQTT-2.2.2.2]. */
export const Prop = {
  PAYLOAD_FORMAT: 0x01,
  MESSAGE_EXPIRY: 0x02,
  CONTENT_TYPE: 0x03,
  RESPONSE_TOPIC: 0x08,
  CORRELATION_DATA: 0x09,
  SUBSCRIPTION_ID: 0x0b,
  SESSION_EXPIRY: 0x11,
  ASSIGNED_CLIENT_ID: 0x12,
  SERVER_KEEP_ALIVE: 0x13,
  AUTH_METHOD: 0x15,
  AUTH_DATA: 0x16,
  REQUEST_PROBLEM_INFO: 0x17,
  WILL_DELAY: 0x18,
  REQUEST_RESPONSE_INFO: 0x19,
  RESPONSE_INFO: 0x1a,
  SERVER_REFERENCE: 0x1c,
  REASON_STRING: 0x1f,
  RECEIVE_MAXIMUM: 0x21,
  TOPIC_ALIAS_MAXIMUM: 0x22,
  TOPIC_ALIAS: 0x23,
  MAXIMUM_QOS: 0x24,
  RETAIN_AVAILABLE: 0x25,
  USER_PROPERTY: 0x26,
  MAXIMUM_PACKET_SIZE: 0x27,
  WILDCARD_SUB_AVAILABLE: 0x28,
  SUB_ID_AVAILABLE: 0x29,
  SHARED_SUB_AVAILABLE: 0x2a,
} as const;

/** How a property's value is encoded [MQTT-1.5]. */
export const Kind = {
  BYTE: 0,
  U16: 1,
  U32: 2,
  VARINT: 3,
  STRING: 4,
  BINARY: 5,
  PAIR: 6,
} as const;
/** One of {@link Kind}. */
export type Kind = typeof Kind[keyof typeof Kind];

/** Value kind and field name of every property the gateway reads or writes. */
export const PROPERTY: ReadonlyMap<number, readonly [Kind, string]> = new Map([
  [Prop.PAYLOAD_FORMAT, [Kind.BYTE, "payloadFormat"]],
  [Prop.MESSAGE_EXPIRY, [Kind.U32, "messageExpiry"]],
  [Prop.CONTENT_TYPE, [Kind.STRING, "contentType"]],
  [Prop.RESPONSE_TOPIC, [Kind.STRING, "responseTopic"]],
  [Prop.CORRELATION_DATA, [Kind.BINARY, "correlationData"]],
  [Prop.SUBSCRIPTION_ID, [Kind.VARINT, "subscriptionId"]],
  [Prop.SESSION_EXPIRY, [Kind.U32, "sessionExpiry"]],
  [Prop.ASSIGNED_CLIENT_ID, [Kind.STRING, "assignedClientId"]],
  [Prop.SERVER_KEEP_ALIVE, [Kind.U16, "serverKeepAlive"]],
  [Prop.AUTH_METHOD, [Kind.STRING, "authenticationMethod"]],
  [Prop.AUTH_DATA, [Kind.BINARY, "authenticationData"]],
  [Prop.REQUEST_PROBLEM_INFO, [Kind.BYTE, "requestProblemInformation"]],
  [Prop.WILL_DELAY, [Kind.U32, "willDelay"]],
  [Prop.REQUEST_RESPONSE_INFO, [Kind.BYTE, "requestResponseInformation"]],
  [Prop.RESPONSE_INFO, [Kind.STRING, "responseInformation"]],
  [Prop.SERVER_REFERENCE, [Kind.STRING, "serverReference"]],
  [Prop.REASON_STRING, [Kind.STRING, "reasonString"]],
  [Prop.RECEIVE_MAXIMUM, [Kind.U16, "receiveMaximum"]],
  [Prop.TOPIC_ALIAS_MAXIMUM, [Kind.U16, "topicAliasMaximum"]],
  [Prop.TOPIC_ALIAS, [Kind.U16, "topicAlias"]],
  [Prop.MAXIMUM_QOS, [Kind.BYTE, "maximumQos"]],
  [Prop.RETAIN_AVAILABLE, [Kind.BYTE, "retainAvailable"]],
  [Prop.USER_PROPERTY, [Kind.PAIR, "userProperties"]],
  [Prop.MAXIMUM_PACKET_SIZE, [Kind.U32, "maximumPacketSize"]],
  [Prop.WILDCARD_SUB_AVAILABLE, [Kind.BYTE, "wildcardSubscriptionAvailable"]],
  [Prop.SUB_ID_AVAILABLE, [Kind.BYTE, "subscriptionIdentifiersAvailable"]],
  [Prop.SHARED_SUB_AVAILABLE, [Kind.BYTE, "sharedSubscriptionAvailable"]],
]);

const P = Prop;

/** The properties each client-to-server packet may carry [MQTT-3.x.2.2]. */
export const ALLOWED = {
  CONNECT: new Set<number>([
    P.SESSION_EXPIRY,
    P.RECEIVE_MAXIMUM,
    P.MAXIMUM_PACKET_SIZE,
    P.TOPIC_ALIAS_MAXIMUM,
    P.REQUEST_RESPONSE_INFO,
    P.REQUEST_PROBLEM_INFO,
    P.USER_PROPERTY,
    P.AUTH_METHOD,
    P.AUTH_DATA,
  ]),
  WILL: new Set<number>([
    P.WILL_DELAY,
    P.PAYLOAD_FORMAT,
    P.MESSAGE_EXPIRY,
    P.CONTENT_TYPE,
    P.RESPONSE_TOPIC,
    P.CORRELATION_DATA,
    P.USER_PROPERTY,
  ]),
  // A client may not send a Subscription Identifier [MQTT-3.3.4-6].
  PUBLISH: new Set<number>([
    P.PAYLOAD_FORMAT,
    P.MESSAGE_EXPIRY,
    P.TOPIC_ALIAS,
    P.RESPONSE_TOPIC,
    P.CORRELATION_DATA,
    P.USER_PROPERTY,
    P.CONTENT_TYPE,
  ]),
  PUBACK: new Set<number>([P.REASON_STRING, P.USER_PROPERTY]),
  // PUBREC, PUBREL and PUBCOMP allow the same two [MQTT-3.5.2.2, 3.6.2.2, 3.7.2.2].
  ACK: new Set<number>([P.REASON_STRING, P.USER_PROPERTY]),
  SUBSCRIBE: new Set<number>([P.SUBSCRIPTION_ID, P.USER_PROPERTY]),
  UNSUBSCRIBE: new Set<number>([P.USER_PROPERTY]),
  DISCONNECT: new Set<number>([
    P.SESSION_EXPIRY,
    P.REASON_STRING,
    P.USER_PROPERTY,
    P.SERVER_REFERENCE,
  ]),
} as const;

/** Decoded properties by field name (see {@link PROPERTY}). */
export type PropertyBag = Record<string, unknown>;

/** Shared result for the common case of an empty property block (no allocation). */
const NONE: PropertyBag = Object.freeze({});

/** The default bound on user properties when the decoder is given none. */
const DEFAULT_MAX_USER_PROPERTIES = 32;

/**
 * Reads a property block (length, then properties) at the reader's position. `what` names the
 * packet in errors. Returns a frozen empty bag when the block is empty.
 */
export function readProperties(
  r: Reader,
  allowed: ReadonlySet<number>,
  what: string,
  maxUserProperties = DEFAULT_MAX_USER_PROPERTIES,
): PropertyBag {
  const length = r.varint();
  if (length === 0) return NONE;
  const end = r.pos + length;
  if (end > r.end) {
    throw new ProtocolError("MQTT-2.2.2-1", `${what} property length past the packet`);
  }
  const inner = new Reader(r.b, r.pos, end);
  const bag: PropertyBag = {};
  let users = 0;
  while (inner.left > 0) {
    const id = inner.varint();
    const spec = PROPERTY.get(id);
    if (spec === undefined || !allowed.has(id)) {
      throw new ProtocolError(
        "MQTT-2.2.2-2",
        `${what} carries property 0x${id.toString(16)}, which it may not`,
      );
    }
    const [kind, name] = spec;
    const value = READ_VALUE[kind](inner);
    if (kind === Kind.PAIR) {
      if (++users > maxUserProperties) {
        throw new ProtocolError(
          "MQTT-3.3.2-user-property-limit",
          `${what} carries more than ${maxUserProperties} user properties`,
          0x95,
        );
      }
      ((bag[name] ??= []) as unknown[]).push(value);
      continue;
    }
    if (name in bag) {
      throw new ProtocolError(
        "MQTT-2.2.2-2",
        `${what} carries property ${name} more than once`,
        REASON_PROTOCOL_ERROR,
      );
    }
    checkValue(id, value as number, what);
    bag[name] = value;
  }
  r.pos = end;
  return bag;
}

/** How a value of each {@link Kind} is read. */
const READ_VALUE: Readonly<Record<Kind, (r: Reader) => unknown>> = {
  [Kind.BYTE]: (r) => r.u8(),
  [Kind.U16]: (r) => r.u16(),
  [Kind.U32]: (r) => r.u32(),
  [Kind.VARINT]: (r) => r.varint(),
  [Kind.STRING]: (r) => r.string(),
  [Kind.BINARY]: (r) => r.bytes(),
  // Name, then value: array elements are read left to right.
  [Kind.PAIR]: (r) => [r.string(), r.string()] as const,
};

/** The values a property may not take: Protocol Error (0x82). */
function checkValue(id: number, v: number, what: string): void {
  let bad = false;
  switch (id) {
    case P.PAYLOAD_FORMAT:
    case P.REQUEST_PROBLEM_INFO:
    case P.REQUEST_RESPONSE_INFO:
      bad = v !== 0 && v !== 1;
      break;
    case P.RECEIVE_MAXIMUM: // [MQTT-3.1.2-…] 0 is a Protocol Error
    case P.MAXIMUM_PACKET_SIZE:
    case P.TOPIC_ALIAS:
    case P.SUBSCRIPTION_ID: // [MQTT-3.8.2.1.2] 0 is a Protocol Error
      bad = v === 0;
      break;
  }
  if (bad) {
    const name = PROPERTY.get(id)![1];
    throw new ProtocolError("MQTT-2.2.2-2", `${what} ${name} of ${v}`, REASON_PROTOCOL_ERROR);
  }
}

/** Throws Malformed Packet when the reader is not at its end. */
export function expectEnd(r: Reader, what: string): void {
  if (r.left !== 0) {
    throw new ProtocolError("MQTT-2.2.3", `Unexpected bytes after ${what}`, REASON_MALFORMED);
  }
}
