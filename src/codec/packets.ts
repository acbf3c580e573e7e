/**
 * MQTT 3.1.1 and MQTT 5 control packets as the gateway sees them after decoding.
 * Strings are already validated UTF-8 [MQTT-1.5.3-1]; binary fields stay bytes. MQTT 5 packets
 * carry their properties in `properties` (absent on 3.1.1 packets, so their shape is unchanged).
 *
 * @module
 */

/** Packet type numbers (fixed header, high nibble) [MQTT-2.2.1]. */
export const PacketType = {
  CONNECT: 1,
  CONNACK: 2,
  PUBLISH: 3,
  PUBACK: 4,
  PUBREC: 5,
  PUBREL: 6,
  PUBCOMP: 7,
  SUBSCRIBE: 8,
  SUBACK: 9,
  UNSUBSCRIBE: 10,
  UNSUBACK: 11,
  PINGREQ: 12,
  PINGRESP: 13,
  DISCONNECT: 14,
} as const;

/** MQTT 5 user properties: name/value pairs, repeated names kept, in order [MQTT-3.3.2-18]. */
export type UserProperties = readonly (readonly [string, string])[];

/** MQTT 5 properties of an application message (PUBLISH, will) [MQTT-3.3.2.3]. */
export interface MessageProperties {
  readonly payloadFormat?: 0 | 1;
  /** Message expiry interval, seconds. */
  readonly messageExpiry?: number;
  readonly contentType?: string;
  readonly responseTopic?: string;
  readonly correlationData?: Uint8Array;
  readonly userProperties?: UserProperties;
}

/** MQTT 5 PUBLISH properties from a client (the topic alias is resolved by the decoder). */
export interface PublishProperties extends MessageProperties {
  readonly topicAlias?: number;
}

/** MQTT 5 will properties [MQTT-3.1.3.2]. */
export interface WillProperties extends MessageProperties {
  /** Will delay interval, seconds. */
  readonly willDelay?: number;
}

/** MQTT 5 CONNECT properties [MQTT-3.1.2.11]. */
export interface ConnectProperties {
  readonly sessionExpiry?: number;
  readonly receiveMaximum?: number;
  readonly maximumPacketSize?: number;
  readonly topicAliasMaximum?: number;
  readonly requestResponseInformation?: 0 | 1;
  readonly requestProblemInformation?: 0 | 1;
  readonly authenticationMethod?: string;
  readonly authenticationData?: Uint8Array;
  readonly userProperties?: UserProperties;
}

/** The will message of a CONNECT. */
export interface Will {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  /** MQTT 5 only. */
  readonly properties?: WillProperties;
}

/** CONNECT. A CONNECT of another protocol level decodes as `unsupported` (see decoder). */
export interface ConnectPacket {
  readonly type: "connect";
  readonly protocolName: string;
  readonly protocolLevel: number;
  readonly cleanSession: boolean;
  readonly keepAliveSeconds: number;
  readonly clientId: string;
  readonly will: Will | null;
  readonly username: string | null;
  readonly password: Uint8Array | null;
  /** MQTT 5 only (protocol level 5). */
  readonly properties?: ConnectProperties;
}

/** PUBLISH. `packetId` is 0 for QoS 0. `topicBytes` is the exact encoded topic. */
export interface PublishPacket {
  readonly type: "publish";
  readonly topic: string;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly dup: boolean;
  readonly packetId: number;
  readonly payload: Uint8Array;
  /** MQTT 5 only; a topic alias has been resolved into `topic`. */
  readonly properties?: PublishProperties;
}

/** One topic filter of a SUBSCRIBE with its requested QoS. */
export interface Subscription {
  readonly filter: string;
  readonly qos: 0 | 1 | 2;
  /** MQTT 5 subscription options [MQTT-3.8.3.1]; absent on 3.1.1. */
  readonly options?: SubscriptionOptions;
}

/** MQTT 5 subscription options and the SUBSCRIBE's subscription identifier. */
export interface SubscriptionOptions {
  readonly noLocal: boolean;
  readonly retainAsPublished: boolean;
  /** 0 send retained at subscribe, 1 only if new, 2 never (there is no retained store). */
  readonly retainHandling: 0 | 1 | 2;
  /** Subscription identifier of the SUBSCRIBE (1..268,435,455), 0 when none. */
  readonly subscriptionId: number;
  readonly userProperties?: UserProperties;
}

/** The packets of the QoS 2 flows. */
export type QosFlowType = "pubrec" | "pubrel" | "pubcomp";

/** PUBREC, PUBREL or PUBCOMP; `reasonCode` MQTT 5 only (absent: 0 Success). */
export interface QosFlowPacket<T extends QosFlowType = QosFlowType> {
  readonly type: T;
  readonly packetId: number;
  readonly reasonCode?: number;
}

/** Client-to-server packets the gateway accepts after decoding. */
export type ClientPacket =
  | ConnectPacket
  | PublishPacket
  | { readonly type: "puback"; readonly packetId: number; readonly reasonCode?: number }
  /** The QoS 2 flows [MQTT-4.3.3]: PUBREL of a client's publish, PUBREC/PUBCOMP of a copy. */
  | QosFlowPacket<"pubrec">
  | QosFlowPacket<"pubrel">
  | QosFlowPacket<"pubcomp">
  | {
    readonly type: "subscribe";
    readonly packetId: number;
    readonly subscriptions: readonly Subscription[];
  }
  | { readonly type: "unsubscribe"; readonly packetId: number; readonly filters: readonly string[] }
  | { readonly type: "pingreq" }
  | {
    readonly type: "disconnect";
    /** MQTT 5 reason code (0 normal, 4 with will message); absent on 3.1.1. */
    readonly reasonCode?: number;
    readonly sessionExpiry?: number;
  }
  /** A CONNECT of a protocol level we do not speak; answered with CONNACK 1 and closed. */
  | { readonly type: "connect_unsupported"; readonly protocolName: string; readonly level: number };
