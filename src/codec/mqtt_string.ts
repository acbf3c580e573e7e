/**
 * Strict UTF-8 for MQTT strings [MQTT-1.5.3-1]: ill-formed sequences (overlong forms,
 * surrogates U+D800..U+DFFF, truncated sequences) and U+0000 [MQTT-1.5.3-2] are errors.
 *
 * @module
 */
import { ProtocolError } from "./errors.ts";

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Decodes `bytes[start, end)` as an MQTT string or throws {@link ProtocolError}. */
export function decodeMqttString(bytes: Uint8Array, start: number, end: number): string {
  // Fast path: short ASCII strings (nearly every topic) avoid the TextDecoder call.
  if (end - start <= 64) {
    let s = "";
    let ascii = true;
    for (let i = start; i < end; i++) {
      const b = bytes[i];
      if (b === 0) throw new ProtocolError("MQTT-1.5.3-2", "String contains U+0000");
      if (b >= 0x80) {
        ascii = false;
        break;
      }
      s += String.fromCharCode(b);
    }
    if (ascii) return s;
  }
  let s: string;
  try {
    s = strict.decode(bytes.subarray(start, end));
  } catch {
    throw new ProtocolError("MQTT-1.5.3-1", "String is not well-formed UTF-8");
  }
  if (s.includes("\u0000")) throw new ProtocolError("MQTT-1.5.3-2", "String contains U+0000");
  return s;
}

/** U+0001..U+001F and U+007F..U+009F (U+0000 is refused by every decode already). */
export function isControlChar(c: number): boolean {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f);
}
