/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` value, parsed and
 * written. Pure, no OpenTelemetry: the way in checks a device's `traceparent` whether or not
 * telemetry is exported.
 *
 * @module
 */

/** The header (and MQTT 5 user property) names the W3C specification gives them. */
export const TRACEPARENT = "traceparent";
export const TRACESTATE = "tracestate";

/** A parsed `traceparent`: ids in lowercase hex, as the header writes them. */
export interface TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  /** The trace flags (bit 0: sampled). */
  readonly flags: number;
}

/** `version-traceid-parentid-flags` of version 00: 2+1+32+1+16+1+2 characters. */
const V00_LENGTH = 55;

/**
 * `v` parsed, or null when it is not a valid `traceparent`: not lowercase hex in the 00 layout,
 * version ff, an all-zero trace or parent id, or a version 00 value with anything after it. A
 * later version is read by its first 55 characters when a `-` follows them (the specification's
 * forward compatibility).
 */
export function parseTraceparent(v: string): TraceParent | null {
  if (v.length < V00_LENGTH) return null;
  if (v[2] !== "-" || v[35] !== "-" || v[52] !== "-") return null;
  const version = v.slice(0, 2);
  if (!isHex(version) || version === "ff") return null;
  if (version === "00" ? v.length !== V00_LENGTH : v.length > V00_LENGTH && v[55] !== "-") {
    return null;
  }
  const traceId = v.slice(3, 35);
  const spanId = v.slice(36, 52);
  const flags = v.slice(53, 55);
  if (!isHex(traceId) || !isHex(spanId) || !isHex(flags)) return null;
  if (isZero(traceId) || isZero(spanId)) return null;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

/** The version 00 `traceparent` of a span. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, "0")}`;
}

function isHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false; // 0-9 a-f
  }
  return true;
}

function isZero(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s[i] !== "0") return false;
  return true;
}
