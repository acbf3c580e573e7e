/**
 * MQTT 5 message properties in the envelope: stored as Iggy headers under
 * documented names (docs/OPERATIONS.md, "MQTT 5 properties in the log"), and read back for
 * MQTT 5 subscribers. 3.1.1 messages carry none of these headers.
 *
 * | property                 | header                         | value                       |
 * | ------------------------ | ------------------------------ | --------------------------- |
 * | payload format indicator | `mqtt5.payload_format`         | `1` (absent when 0)         |
 * | message expiry interval  | `mqtt5.message_expiry_s`       | seconds, from append time   |
 * | content type             | `mqtt5.content_type`           | the string                  |
 * | response topic           | `mqtt5.response_topic`         | the string                  |
 * | correlation data         | `mqtt5.correlation_data`       | base64                      |
 * | user property i          | `mqtt5.user.<i>.<name>`        | the value                   |
 *
 * `<i>` is the 0-based position, so repeated names and their order survive Iggy's header map.
 * Iggy needs every key and value to be 1..255 bytes: an empty value is stored as U+0000 (which
 * no MQTT string can contain), and a property that cannot fit is refused by
 * {@link checkPropertiesFit} before anything is appended — never cut or dropped.
 *
 * @module
 */
import type { MessageProperties } from "../codec/packets.ts";
import { utf8Length } from "../base/utf8.ts";
import { TRACEPARENT } from "../observe/trace_context.ts";
import { isTraceProperty, type StoredTrace, withTraceProperties } from "./trace_headers.ts";

/** Header names (the table above); only this module reads or writes them. */
const H5_PAYLOAD_FORMAT = "mqtt5.payload_format";
const H5_MESSAGE_EXPIRY = "mqtt5.message_expiry_s";
const H5_CONTENT_TYPE = "mqtt5.content_type";
const H5_RESPONSE_TOPIC = "mqtt5.response_topic";
const H5_CORRELATION_DATA = "mqtt5.correlation_data";
const H5_USER_PREFIX = "mqtt5.user.";

/** Iggy's bound on a header key and on a header value (bytes). */
const MAX_HEADER_BYTES = 255;
/** How an empty string value is stored (Iggy refuses empty values). */
const EMPTY_VALUE = "\u0000";

/** Why `props` cannot be stored as Iggy headers, or null when they fit. */
export function checkPropertiesFit(props: MessageProperties): string | null {
  const tooLong = (v: string) => utf8Length(v) > MAX_HEADER_BYTES;
  if (props.contentType !== undefined && tooLong(props.contentType)) {
    return `content type longer than ${MAX_HEADER_BYTES} bytes`;
  }
  if (props.responseTopic !== undefined && tooLong(props.responseTopic)) {
    return `response topic longer than ${MAX_HEADER_BYTES} bytes`;
  }
  const cd = props.correlationData;
  if (cd !== undefined && base64Length(cd.length) > MAX_HEADER_BYTES) {
    return `correlation data longer than ${Math.floor(MAX_HEADER_BYTES / 4) * 3} bytes`;
  }
  const users = props.userProperties ?? [];
  for (let i = 0; i < users.length; i++) {
    const [name, value] = users[i];
    if (utf8Length(userKey(i, name)) > MAX_HEADER_BYTES) {
      return `user property "${name.slice(0, 40)}": name too long for an Iggy header`;
    }
    if (tooLong(value)) {
      return `user property "${name.slice(0, 40)}": value longer than ${MAX_HEADER_BYTES} bytes`;
    }
  }
  return null;
}

/**
 * Writes `props` into `headers` (call {@link checkPropertiesFit} first), but not the user
 * properties `trace` took (`trace_headers.ts`).
 */
export function stampProperties(
  headers: Map<string, string>,
  props: MessageProperties,
  trace?: StoredTrace,
): void {
  if (props.payloadFormat === 1) headers.set(H5_PAYLOAD_FORMAT, "1");
  if (props.messageExpiry !== undefined) {
    headers.set(H5_MESSAGE_EXPIRY, String(props.messageExpiry));
  }
  if (props.contentType !== undefined) headers.set(H5_CONTENT_TYPE, stored(props.contentType));
  if (props.responseTopic !== undefined) {
    headers.set(H5_RESPONSE_TOPIC, stored(props.responseTopic));
  }
  if (props.correlationData !== undefined) {
    const cd = props.correlationData;
    headers.set(H5_CORRELATION_DATA, cd.length === 0 ? EMPTY_VALUE : toBase64(cd));
  }
  const users = props.userProperties;
  if (users === undefined) return;
  for (let i = 0; i < users.length; i++) {
    if (!isTraceProperty(trace, i)) headers.set(userKey(i, users[i][0]), stored(users[i][1]));
  }
}

/**
 * The stored properties of a message, or null when it has none (a 3.1.1 message outside a
 * trace). The trace headers come back as the user properties `traceparent` and `tracestate`.
 * `messageExpiry` is the stored interval; the caller subtracts the time already spent.
 */
export function readStoredProperties(
  headers: ReadonlyMap<string, string>,
): MessageProperties | null {
  let found = false;
  const out: {
    -readonly [K in keyof MessageProperties]: MessageProperties[K];
  } = {};
  const users: [number, string, string][] = [];
  for (const [k, v] of headers) {
    if (!k.startsWith("mqtt5.")) continue;
    found = true;
    if (k === H5_PAYLOAD_FORMAT) out.payloadFormat = v === "1" ? 1 : 0;
    else if (k === H5_MESSAGE_EXPIRY) out.messageExpiry = Number(v);
    else if (k === H5_CONTENT_TYPE) out.contentType = restored(v);
    else if (k === H5_RESPONSE_TOPIC) out.responseTopic = restored(v);
    else if (k === H5_CORRELATION_DATA) {
      out.correlationData = v === EMPTY_VALUE ? new Uint8Array(0) : fromBase64(v);
    } else if (k.startsWith(H5_USER_PREFIX)) {
      const rest = k.slice(H5_USER_PREFIX.length);
      const dot = rest.indexOf(".");
      const i = Number(rest.slice(0, dot));
      if (dot > 0 && Number.isInteger(i)) users.push([i, rest.slice(dot + 1), restored(v)]);
    }
  }
  const traced = headers.has(TRACEPARENT);
  if (!found && !traced) return null;
  if (users.length > 1) users.sort((a, b) => a[0] - b[0]);
  if (traced) out.userProperties = withTraceProperties(headers, users)!;
  else if (users.length > 0) out.userProperties = users.map(([, n, v]) => [n, v] as const);
  return out;
}

/** The stored message expiry interval (s), or null (one lookup: the 3.1.1 path asks it). */
export function storedExpiry(headers: ReadonlyMap<string, string>): number | null {
  const v = headers.get(H5_MESSAGE_EXPIRY);
  return v === undefined ? null : Number(v);
}

function userKey(i: number, name: string): string {
  return `${H5_USER_PREFIX}${i}.${name}`;
}

function stored(v: string): string {
  return v === "" ? EMPTY_VALUE : v;
}

function restored(v: string): string {
  return v === EMPTY_VALUE ? "" : v;
}

function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s);
}

function fromBase64(v: string): Uint8Array {
  try {
    return Uint8Array.from(atob(v), (c) => c.charCodeAt(0));
  } catch {
    return new Uint8Array(0); // not written by us: nothing to restore
  }
}
