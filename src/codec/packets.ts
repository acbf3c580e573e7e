/**
 * MQTT 3.1.1 control packets as the gateway sees them after decoding.
 * Strings are already validated UTF-8 [MQTT-1.5.3-1]; binary fields stay bytes.
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

/** The will message of a CONNECT. */
export interface Will {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
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
}

/** PUBLISH. `packetId` is 0 for QoS 0. `topicBytes` is the exact encoded topic. */
export interface PublishPacket {
  readonly type: "publish";
  readonly topic: string;
  readonly qos: 0 | 1;
  readonly retain: boolean;
  readonly dup: boolean;
  readonly packetId: number;
  readonly payload: Uint8Array;
}

/** One topic filter of a SUBSCRIBE with its requested QoS. */
export interface Subscription {
  readonly filter: string;
  readonly qos: 0 | 1 | 2;
}

/** Client-to-server packets the gateway accepts after decoding. */
export type ClientPacket =
  | ConnectPacket
  | PublishPacket
  | { readonly type: "puback"; readonly packetId: number }
  | {
    readonly type: "subscribe";
    readonly packetId: number;
    readonly subscriptions: readonly Subscription[];
  }
  | { readonly type: "unsubscribe"; readonly packetId: number; readonly filters: readonly string[] }
  | { readonly type: "pingreq" }
  | { readonly type: "disconnect" }
  /** A CONNECT of a protocol level we do not speak; answered with CONNACK 1 and closed. */
  | { readonly type: "connect_unsupported"; readonly protocolName: string; readonly level: number };
