/**
 * IP literals as bytes and back, for the listeners (binding, peer names, the PROXY protocol's
 * addresses) and for the config's address lists (`listeners.proxy_protocol_from`).
 *
 * @module
 */

/**
 * The 4 or 16 bytes of an IP literal, or null when `host` is not one. IPv6 may end in an
 * IPv4 part (`::ffff:10.0.0.1`, as inet_ntop writes an IPv4 peer of a dual-stack socket).
 */
export function parseIp(host: string): Uint8Array | null {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (v4 !== null) {
    const b = v4.slice(1).map(Number);
    return b.every((x) => x <= 255) ? Uint8Array.from(b) : null;
  }
  const tail4 = /^(.*:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(host);
  if (tail4 !== null) {
    const low = parseIp(tail4[2]);
    const high = low === null ? null : parseIp(`${tail4[1]}0:0`);
    if (high === null) return null;
    high.set(low!, 12);
    return high;
  }
  if (!/^[0-9a-fA-F:]+$/.test(host) || host.split("::").length > 2) return null;
  const [head, tail] = host.includes("::") ? host.split("::") : [host, null];
  const groups = (s: string) => s === "" ? [] : s.split(":");
  const h = groups(head);
  const t = tail === null ? [] : groups(tail);
  const zeros = 8 - h.length - t.length;
  if ((tail === null && zeros !== 0) || zeros < 0 || [...h, ...t].some((g) => g.length > 4)) {
    return null;
  }
  if ([...h, ...t].some((g) => g === "")) return null;
  const all = [...h, ...Array(zeros).fill("0"), ...t].map((g) => parseInt(g, 16));
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  return out;
}

/** Whether 16 bytes are an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`). */
export function isMappedIpv4(b: Uint8Array): boolean {
  return b.length === 16 && b[10] === 0xff && b[11] === 0xff &&
    b.subarray(0, 10).every((x) => x === 0);
}

/**
 * 4 or 16 bytes as node:net prints an address, except that an IPv4-mapped IPv6 address
 * (`::ffff:10.0.0.1`) is `10.0.0.1`, as the listeners name an IPv4 peer of a dual-stack socket:
 * one client has one name, whichever way it came (per-source limits and anonymous rules
 * compare names).
 */
export function formatIp(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (isMappedIpv4(b)) return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const g = Array.from({ length: 8 }, (_, i) => (b[2 * i] << 8) | b[2 * i + 1]);
  // The longest run of two or more zero groups becomes "::" (RFC 5952).
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

/** One `address/prefix` block. */
interface Block {
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

/**
 * A set of IP blocks (`10.0.0.0/8`, `fd00::/8`, or single addresses), matched against peer
 * names. An IPv4 block also matches the IPv4-mapped IPv6 form of its addresses.
 */
export class IpBlockSet {
  readonly #blocks: readonly Block[];

  /** Throws an Error naming the first entry that is not an IP or `IP/prefix`. */
  constructor(entries: readonly string[]) {
    this.#blocks = entries.map(parseBlock);
  }

  get size(): number {
    return this.#blocks.length;
  }

  /** Whether `address` (an IP literal) lies in one of the blocks; false for a non-IP. */
  has(address: string): boolean {
    if (this.#blocks.length === 0) return false;
    let ip = parseIp(address);
    if (ip === null) return false;
    if (isMappedIpv4(ip)) ip = ip.subarray(12);
    for (const b of this.#blocks) if (b.bytes.length === ip.length && inBlock(ip, b)) return true;
    return false;
  }
}

function parseBlock(entry: string): Block {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(entry.trim());
  let ip = m === null ? null : parseIp(m[1]);
  if (ip !== null && isMappedIpv4(ip) && m![2] === undefined) ip = ip.subarray(12);
  const bits = ip === null ? 0 : ip.length * 8;
  const prefix = m?.[2] === undefined ? bits : Number(m[2]);
  if (ip === null || prefix > bits) {
    throw new Error(`"${entry}" is not an IP address or a CIDR block (e.g. "10.0.0.0/8")`);
  }
  return { bytes: ip, prefix };
}

function inBlock(ip: Uint8Array, b: Block): boolean {
  const whole = b.prefix >> 3;
  for (let i = 0; i < whole; i++) if (ip[i] !== b.bytes[i]) return false;
  const rest = b.prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (ip[whole] & mask) === (b.bytes[whole] & mask);
}
