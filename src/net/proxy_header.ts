/**
 * The PROXY protocol header (versions 1 and 2, haproxy's doc/proxy-protocol.txt) that a load
 * balancer such as HAProxy or nginx puts before the first byte of a connection it relays, to
 * say whose connection it is. Parsed strictly: any sequence that does not match the protocol
 * is refused (the spec: "must be discarded and cause the receiver to abort the connection"),
 * and nothing is guessed: from a trusted source the header must be there.
 *
 * The header says where the real endpoint's address is to be used instead (`source: null`):
 * a v2 LOCAL command (the balancer's own health check), v1 `UNKNOWN`, and v2 families the
 * gateway does not take an address from (AF_UNSPEC, AF_UNIX, and datagram transports), which
 * the spec lets a receiver treat as UNSPEC. TLVs after a v2 address block are skipped (a
 * receiver may ignore them; the CRC32C TLV is not checked).
 *
 * @module
 */
import { formatIp, parseIp } from "../base/ip.ts";

/** The longest v1 line, CRLF included: longer without a CRLF is refused. */
export const MAX_V1_HEADER_BYTES = 107;
/**
 * The longest v2 header taken (16 bytes + address block + TLVs). The protocol allows 65,551;
 * balancers send an address block and a few TLVs (ALPN, authority, a unique id, TLS facts), a
 * few hundred bytes. A longer one is refused from its first 16 bytes, before it is buffered.
 */
export const MAX_V2_HEADER_BYTES = 4096;

const V1_PREFIX = new TextEncoder().encode("PROXY ");
/** "\r\n\r\n\0\r\nQUIT\n". */
const V2_SIGNATURE = new TextEncoder().encode("\r\n\r\n\0\r\nQUIT\n");
/** v2 address block bytes each family needs (IPv4, IPv6, UNIX). */
const V2_ADDRESS_BYTES = [0, 12, 36, 216];

/** What the first bytes of a connection say. */
export type ProxyParse =
  /** Too few bytes yet to tell. */
  | { readonly kind: "more" }
  /** A valid header of `length` bytes; `source`: the client's address, or null: use the peer's. */
  | {
    readonly kind: "header";
    readonly version: 1 | 2;
    readonly length: number;
    readonly source: string | null;
  }
  /** Not a valid header: the connection is to be closed. */
  | { readonly kind: "bad"; readonly reason: string };

const MORE: ProxyParse = { kind: "more" };

function bad(reason: string): ProxyParse {
  return { kind: "bad", reason };
}

/** Whether `bytes` so far agree with `prefix` (as far as either goes). */
function agrees(bytes: Uint8Array, prefix: Uint8Array): boolean {
  const n = Math.min(bytes.length, prefix.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

/**
 * Whether a connection's first bytes begin (or may begin) a PROXY header: a source not
 * trusted to send one is refused on this, where MQTT would only see a malformed packet.
 */
export function looksLikeProxyHeader(first: Uint8Array): boolean {
  return first.length > 0 && (agrees(first, V1_PREFIX) || agrees(first, V2_SIGNATURE));
}

/** Parses the PROXY header at the start of `bytes` (the connection's first bytes). */
export function parseProxyHeader(bytes: Uint8Array): ProxyParse {
  if (bytes.length === 0) return MORE;
  if (agrees(bytes, V2_SIGNATURE)) {
    return bytes.length < 16 ? MORE : parseV2(bytes);
  }
  if (agrees(bytes, V1_PREFIX)) {
    return bytes.length < V1_PREFIX.length ? MORE : parseV1(bytes);
  }
  return bad("no PROXY protocol header (a trusted source must send one)");
}

function parseV2(b: Uint8Array): ProxyParse {
  const version = b[12] >> 4;
  const command = b[12] & 0x0f;
  if (version !== 2) return bad(`PROXY v2: version ${version}, not 2`);
  if (command > 1) return bad(`PROXY v2: unknown command ${command}`);
  const family = b[13] >> 4;
  const transport = b[13] & 0x0f;
  if (family > 3) return bad(`PROXY v2: unknown address family ${family}`);
  if (transport > 2) return bad(`PROXY v2: unknown transport protocol ${transport}`);
  const length = 16 + ((b[14] << 8) | b[15]);
  if (length > MAX_V2_HEADER_BYTES) {
    return bad(`PROXY v2: header of ${length} bytes, over ${MAX_V2_HEADER_BYTES}`);
  }
  if (b.length < length) return MORE;
  // LOCAL: the balancer's own connection (a health check); family and addresses are ignored.
  if (command === 0) return { kind: "header", version: 2, length, source: null };
  if (length - 16 < V2_ADDRESS_BYTES[family]) {
    return bad(`PROXY v2: address block of ${length - 16} bytes, short for family ${family}`);
  }
  // TCP over IPv4 or IPv6; UNSPEC, UNIX and datagrams fall back to the real endpoint.
  if (transport !== 1 || (family !== 1 && family !== 2)) {
    return { kind: "header", version: 2, length, source: null };
  }
  const source = formatIp(b.slice(16, family === 1 ? 20 : 32));
  return { kind: "header", version: 2, length, source };
}

const V4_PART = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const V4 = new RegExp(`^${V4_PART}(?:\\.${V4_PART}){3}$`);
const PORT = /^(?:0|[1-9]\d{0,4})$/;

function parseV1(b: Uint8Array): ProxyParse {
  const scan = Math.min(b.length, MAX_V1_HEADER_BYTES);
  let end = -1;
  for (let i = 0; i < scan; i++) {
    if (b[i] === 0x0d) {
      if (i + 1 >= b.length) return MORE;
      if (b[i + 1] !== 0x0a) return bad("PROXY v1: CR without LF");
      end = i;
      break;
    }
    if (b[i] === 0x0a) return bad("PROXY v1: LF without CR");
    if (b[i] < 0x20 || b[i] > 0x7e) return bad("PROXY v1: a byte that is not printable US-ASCII");
  }
  if (end < 0) {
    return b.length < MAX_V1_HEADER_BYTES
      ? MORE
      : bad(`PROXY v1: no CRLF in the first ${MAX_V1_HEADER_BYTES} bytes`);
  }
  const line = String.fromCharCode(...b.subarray(0, end));
  const length = end + 2;
  const words = line.split(" ");
  if (words[1] === "UNKNOWN") return { kind: "header", version: 1, length, source: null };
  if (words.length !== 6) return bad(`PROXY v1: "${line}" is not 6 fields`);
  const [, proto, src, dst, sport, dport] = words;
  if (proto !== "TCP4" && proto !== "TCP6") return bad(`PROXY v1: protocol "${proto}"`);
  for (const a of [src, dst]) {
    if (!isV1Address(proto, a)) return bad(`PROXY v1: "${a}" is not a ${proto} address`);
  }
  for (const p of [sport, dport]) {
    if (!PORT.test(p) || Number(p) > 65535) return bad(`PROXY v1: "${p}" is not a port`);
  }
  return { kind: "header", version: 1, length, source: formatIp(parseIp(src)!) };
}

function isV1Address(proto: "TCP4" | "TCP6", a: string): boolean {
  if (proto === "TCP4") return V4.test(a);
  return a.includes(":") && parseIp(a)?.length === 16;
}
