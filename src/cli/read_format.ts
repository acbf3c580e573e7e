/**
 * Output of the `read` command: one JSON object per message (`--json`) or a short line.
 *
 * @module
 */
import type { StoredMessage } from "../log/port.ts";

const strict = new TextDecoder("utf-8", { fatal: true });

/** The payload as text, or base64 (flagged) when it is not UTF-8. */
function payloadText(m: StoredMessage): { payload: string; base64: boolean } {
  try {
    return { payload: strict.decode(m.payload), base64: false };
  } catch {
    return { payload: btoa(String.fromCharCode(...m.payload)), base64: true };
  }
}

/** Formats one retained message (`read --retained`): its topic, when it was set, its payload. */
export function formatRetained(m: StoredMessage, json: boolean): string {
  const { payload, base64 } = payloadText(m);
  const topic = m.headers.get("mqtt.topic") ?? "-";
  if (json) {
    return JSON.stringify({
      topic,
      set_at: new Date(m.timestampMicros / 1000).toISOString(),
      headers: Object.fromEntries(m.headers),
      payload,
      ...(base64 ? { payload_base64: true } : {}),
    });
  }
  return `${topic} ${base64 ? "(base64) " : ""}${payload}`;
}

/** Formats one stored message. Payloads that are not UTF-8 are base64 with a flag. */
export function formatRead(m: StoredMessage, json: boolean): string {
  const { payload, base64 } = payloadText(m);
  const headers = Object.fromEntries(m.headers);
  if (json) {
    return JSON.stringify({
      partition: m.partition,
      offset: m.offset,
      timestamp: m.timestampMicros,
      headers,
      payload,
      ...(base64 ? { payload_base64: true } : {}),
    });
  }
  return `p${m.partition}@${m.offset} ${headers["mqtt.topic"] ?? "-"} ${
    base64 ? "(base64) " : ""
  }${payload}`;
}
