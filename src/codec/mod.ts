/**
 * Wire codec: bytes ⇄ MQTT 3.1.1 packets, bounded and strict.
 *
 * @module
 */
export { type DecoderLimits, PacketDecoder } from "./decoder.ts";
export {
  ConnackCode,
  encodeConnack,
  encodePingresp,
  encodePuback,
  encodePublish,
  encodeSuback,
  encodeUnsuback,
  remainingLength,
  SUBACK_FAILURE,
  writePuback,
} from "./encoder.ts";
export { ProtocolError } from "./errors.ts";
export type { ClientPacket, ConnectPacket, PublishPacket, Subscription, Will } from "./packets.ts";
export { decodeMqttString } from "./mqtt_string.ts";
