/**
 * The envelope: how an MQTT message is stored in the log (P6) and restored on the
 * way out. The payload is kept unchanged; MQTT facts travel in user headers.
 *
 * @module
 */
import type { MessageProperties } from "../codec/packets.ts";
import { stampProperties } from "./envelope_v5.ts";
import { stampTrace, type StoredTrace } from "./trace_headers.ts";
import type { OutgoingMessage, StoredMessage } from "../log/port.ts";

/** Header names, exactly as the design names them. */
export const H_TOPIC = "mqtt.topic";
export const H_QOS = "mqtt.qos";
export const H_CLIENT_ID = "mqtt.client_id";
export const H_PACKET_ID = "mqtt.packet_id";
export const H_RETAIN = "mqtt.retain";
export const H_EMPTY = "mqtt.empty";
/** Set on a connection's will, published when it ended without DISCONNECT. */
export const H_WILL = "mqtt.will";

/** The `mqtt.qos` value per QoS level (constant strings: no number formatting per message). */
const QOS_VALUE = ["0", "1", "2"] as const;

/** Iggy refuses empty messages; an empty MQTT payload is stored as this one byte + H_EMPTY. */
const EMPTY_STAND_IN = new Uint8Array([0]);

/**
 * Builds the stored form of one PUBLISH. `props`: its MQTT 5 properties, already checked to
 * fit (`envelope_v5.ts`); absent for 3.1.1. `trace`: its trace context (`trace_headers.ts`).
 */
export function envelope(
  topic: string,
  payload: Uint8Array,
  qos: 0 | 1 | 2,
  clientId: string,
  packetId: number,
  retain: boolean,
  will = false,
  props?: MessageProperties,
  trace?: StoredTrace,
): OutgoingMessage {
  const headers = new Map<string, string>();
  if (props !== undefined) stampProperties(headers, props, trace);
  if (trace !== undefined) stampTrace(headers, trace);
  headers.set(H_TOPIC, topic);
  headers.set(H_QOS, QOS_VALUE[qos]);
  headers.set(H_CLIENT_ID, clientId);
  // A will has no packet id (0): nothing to stamp.
  if (qos > 0 && packetId !== 0) headers.set(H_PACKET_ID, String(packetId));
  if (retain) headers.set(H_RETAIN, "true");
  if (will) headers.set(H_WILL, "true");
  if (payload.length === 0) {
    headers.set(H_EMPTY, "true");
    return { payload: EMPTY_STAND_IN, headers };
  }
  return { payload, headers };
}

/** What of a PUBLISH (or a will) goes into its envelope. */
export interface EnvelopedPublish {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1 | 2;
  readonly packetId: number;
  readonly retain: boolean;
  readonly properties?: MessageProperties;
}

/**
 * Makes envelopes, handing out the last header map again when a message's headers would be
 * the same: QoS 0 without a will flag, MQTT 5 properties or a trace, from the same client to the same
 * topic with the same retain flag (there is no packet id to stamp). A read of a QoS 0 flood
 * then allocates no map per message, and the Iggy encoder copies the headers it wrote for the
 * message before (it checks by identity). The map is read-only (`OutgoingMessage.headers`), so
 * sharing it is safe. One entry: a read is one client's, usually to one topic.
 */
export class EnvelopeMaker {
  #topic = "";
  #clientId = "";
  #retain = false;
  #headers: ReadonlyMap<string, string> | null = null;

  /** {@link envelope} of `p` from `clientId`, with the header map shared as the class says. */
  make(p: EnvelopedPublish, clientId: string, will = false, trace?: StoredTrace): OutgoingMessage {
    const { topic, payload, qos, retain, properties } = p;
    const shareable = qos === 0 && !will && properties === undefined && payload.length > 0 &&
      trace === undefined;
    if (!shareable) {
      return envelope(topic, payload, qos, clientId, p.packetId, retain, will, properties, trace);
    }
    const last = this.#headers;
    if (
      last !== null && topic === this.#topic && clientId === this.#clientId &&
      retain === this.#retain
    ) {
      return { payload, headers: last };
    }
    const made = envelope(topic, payload, 0, clientId, 0, retain);
    this.#topic = topic;
    this.#clientId = clientId;
    this.#retain = retain;
    this.#headers = made.headers;
    return made;
  }
}

/** The MQTT view of a stored message, or null when it was not written by an MQTT client. */
export interface MqttView {
  readonly topic: string;
  readonly qos: 0 | 1 | 2;
  readonly payload: Uint8Array;
}

/** Reads the envelope back (R1); messages without `mqtt.topic` give null (skipped). */
export function openEnvelope(m: StoredMessage): MqttView | null {
  const topic = m.headers.get(H_TOPIC);
  if (topic === undefined || topic === "") return null;
  const stamped = m.headers.get(H_QOS);
  const qos = stamped === "1" ? 1 : stamped === "2" ? 2 : 0;
  const payload = m.headers.get(H_EMPTY) === "true" ? new Uint8Array(0) : m.payload;
  return { topic, qos, payload };
}
