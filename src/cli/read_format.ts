/**
 * Output of the `read` command: one JSON object per message (`--json`) or a short line.
 *
 * @module
 */
import type { StoredMessage } from "../log/port.ts";

const strict = new TextDecoder("utf-8", { fatal: true });

/** Formats one stored message. Payloads that are not UTF-8 are base64 with a flag. */
export function formatRead(m: StoredMessage, json: boolean): string {
  let payload: string;
  let base64 = false;
  try {
    payload = strict.decode(m.payload);
  } catch {
    payload = btoa(String.fromCharCode(...m.payload));
    base64 = true;
  }
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
