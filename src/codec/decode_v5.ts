/**
 * MQTT 5 packet bodies that differ from 3.1.1 (CONNECT is in `decode_connect.ts`): PUBLISH
 * properties and inbound topic aliases, PUBACK with a reason code, SUBSCRIBE with subscription
 * options and identifier, UNSUBSCRIBE and DISCONNECT with properties.
 *
 * @module
 */
import {
  type DecoderLimits,
  packetIdOf,
  Reader,
  readTopicFilter,
  requireSubscriptions,
  unsubscribeFilters,
} from "./_fields.ts";
import { ProtocolError, REASON_PROTOCOL_ERROR } from "./errors.ts";
import type {
  ClientPacket,
  PublishProperties,
  QosFlowPacket,
  Subscription,
  SubscriptionOptions,
  UserProperties,
} from "./packets.ts";
import { ALLOWED, expectEnd, type PropertyBag, readProperties } from "./properties.ts";

/** Reason code 0x94 Topic Alias invalid [MQTT-3.3.2-8]. */
const TOPIC_ALIAS_INVALID = 0x94;

/** One MQTT 5 connection's decoder state: its topic aliases and what its CONNECT said. */
export class V5State {
  /** Inbound topic aliases, 1..topicAliasMaximum → topic; made on first use. */
  #aliases: string[] | null = null;
  /** CONNECT's session expiry was 0: a DISCONNECT may not raise it [MQTT-3.14.2-2]. */
  sessionExpiryZero = true;

  constructor(readonly limits: DecoderLimits) {}

  /**
   * The topic of a PUBLISH after its topic alias [MQTT-3.3.2.3.4]: a topic with an alias sets
   * it, an empty topic takes it. An alias above our Topic Alias Maximum is DISCONNECT 0x94.
   */
  resolveAlias(topic: string, alias: number | undefined): string {
    if (alias === undefined) {
      if (topic === "") {
        throw new ProtocolError("MQTT-3.3.2-8", "Empty topic name without a topic alias", 0x82);
      }
      return topic;
    }
    const max = this.limits.topicAliasMaximum ?? 0;
    if (alias > max) {
      throw new ProtocolError(
        "MQTT-3.3.2-9",
        `Topic alias ${alias} above the Topic Alias Maximum ${max}`,
        TOPIC_ALIAS_INVALID,
      );
    }
    const aliases = this.#aliases ??= [];
    if (topic !== "") {
      aliases[alias] = topic;
      return topic;
    }
    const known = aliases[alias];
    if (known === undefined) {
      throw new ProtocolError(
        "MQTT-3.3.2-8",
        `Topic alias ${alias} used before it was set`,
        REASON_PROTOCOL_ERROR,
      );
    }
    return known;
  }
}

/** The properties and payload start of a PUBLISH whose topic and packet id were read. */
export function readPublishProperties(
  b: Uint8Array,
  pos: number,
  end: number,
  state: V5State,
): { properties: PublishProperties; payloadStart: number } {
  const r = new Reader(b, pos, end);
  const properties = readProperties(
    r,
    ALLOWED.PUBLISH,
    "PUBLISH",
    state.limits.maxUserProperties,
  ) as PublishProperties;
  return { properties, payloadStart: r.pos };
}

/** PUBACK [MQTT-3.4.2]: packet id, then a reason code and properties when the length says so. */
export function decodePuback5(b: Uint8Array, start: number, end: number): ClientPacket {
  const r = new Reader(b, start, end);
  const packetId = r.u16();
  if (packetId === 0) throw new ProtocolError("MQTT-2.3.1-1", "PUBACK with packet identifier 0");
  if (r.left === 0) return { type: "puback", packetId };
  const reasonCode = r.u8();
  if (r.left > 0) readProperties(r, ALLOWED.PUBACK, "PUBACK");
  expectEnd(r, "PUBACK");
  return { type: "puback", packetId, reasonCode };
}

/** PUBREC, PUBREL, PUBCOMP [MQTT-3.5.2, 3.6.2, 3.7.2]: laid out like a PUBACK. */
export function decodeQosFlow5(
  type: QosFlowPacket["type"],
  b: Uint8Array,
  start: number,
  end: number,
): QosFlowPacket {
  const name = type.toUpperCase();
  const r = new Reader(b, start, end);
  const packetId = r.u16();
  if (packetId === 0) throw new ProtocolError("MQTT-2.3.1-1", `${name} with packet identifier 0`);
  if (r.left === 0) return { type, packetId };
  const reasonCode = r.u8();
  if (r.left > 0) readProperties(r, ALLOWED.ACK, name);
  expectEnd(r, name);
  return { type, packetId, reasonCode };
}

/**
 * SUBSCRIBE and UNSUBSCRIBE [MQTT-3.8.2, 3.10.2]: both open with a packet id and properties;
 * then SUBSCRIBE's filters carry subscription options, UNSUBSCRIBE's are bare.
 */
export function decodeSubscription5(
  type: "subscribe" | "unsubscribe",
  b: Uint8Array,
  start: number,
  end: number,
  state: V5State,
): ClientPacket {
  const packet = type === "subscribe" ? "SUBSCRIBE" : "UNSUBSCRIBE";
  const r = new Reader(b, start, end);
  const packetId = packetIdOf(r, packet);
  const props = readProperties(r, ALLOWED[packet], packet, state.limits.maxUserProperties);
  if (type === "unsubscribe") {
    return { type, packetId, filters: unsubscribeFilters(r, 0x82) };
  }
  return { type, packetId, subscriptions: subscriptions5(r, props) };
}

/** SUBSCRIBE's filters with their subscription options [MQTT-3.8.3]; `props` its properties. */
function subscriptions5(r: Reader, props: PropertyBag): Subscription[] {
  const subscriptionId = (props.subscriptionId as number | undefined) ?? 0;
  if (subscriptionId > 268_435_455) {
    throw new ProtocolError("MQTT-3.8.2.1.2", "Subscription identifier too large", 0x82);
  }
  const userProperties = props.userProperties as UserProperties | undefined;
  const subscriptions: Subscription[] = [];
  while (r.left > 0) {
    const filter = readTopicFilter(r);
    const o = r.u8();
    if (o & 0xc0) throw new ProtocolError("MQTT-3.8.3-5", "SUBSCRIBE reserved option bits set");
    const qos = o & 0x03;
    const retainHandling = (o >> 4) & 0x03;
    if (qos === 3) throw new ProtocolError("MQTT-3.8.3-4", "SUBSCRIBE requested QoS 3", 0x82);
    if (retainHandling === 3) {
      throw new ProtocolError("MQTT-3.8.3-4", "SUBSCRIBE Retain Handling 3", 0x82);
    }
    if ((o & 0x04) !== 0 && filter.startsWith("$share/")) {
      throw new ProtocolError("MQTT-3.8.3-4", "No Local on a shared subscription", 0x82);
    }
    const options: SubscriptionOptions = {
      noLocal: (o & 0x04) !== 0,
      retainAsPublished: (o & 0x08) !== 0,
      retainHandling: retainHandling as 0 | 1 | 2,
      subscriptionId,
      ...(userProperties ? { userProperties } : {}),
    };
    subscriptions.push({ filter, qos: qos as 0 | 1 | 2, options });
  }
  requireSubscriptions(subscriptions.length, 0x82);
  return subscriptions;
}

/** DISCONNECT [MQTT-3.14.2]: an optional reason code and properties. */
export function decodeDisconnect5(
  b: Uint8Array,
  start: number,
  end: number,
  state: V5State,
): ClientPacket {
  if (end === start) return { type: "disconnect", reasonCode: 0 };
  const r = new Reader(b, start, end);
  const reasonCode = r.u8();
  let sessionExpiry: number | undefined;
  if (r.left > 0) {
    const props = readProperties(
      r,
      ALLOWED.DISCONNECT,
      "DISCONNECT",
      state.limits.maxUserProperties,
    );
    sessionExpiry = props.sessionExpiry as number | undefined;
    if (sessionExpiry !== undefined && sessionExpiry !== 0 && state.sessionExpiryZero) {
      throw new ProtocolError(
        "MQTT-3.14.2-2",
        "DISCONNECT sets a session expiry after CONNECT said 0",
        REASON_PROTOCOL_ERROR,
      );
    }
  }
  expectEnd(r, "DISCONNECT");
  return sessionExpiry === undefined
    ? { type: "disconnect", reasonCode }
    : { type: "disconnect", reasonCode, sessionExpiry };
}
