/**
 * Claims: the records through which gateways sharing one Iggy hand a client id over. A CONNECT
 * on one gateway appends a claim to the stored-session record topic; every gateway reads it
 * (`session_claims.ts`), and the one that holds a live connection with that id closes it and,
 * once the positions of its session are stored, appends a release naming the claim.
 *
 * Claims travel under their own header ({@link H_CLAIM}), never under the session header: a
 * gateway of the previous version reads only records with the session header and passes over
 * these without a word, and a version that knows claims skips a claim of a later shape (`v`
 * above 1, or fields it does not know) the same way.
 *
 * Fields: `v` 1; a claim: `claim` its nonce, `u` the claiming principal ("" anonymous), `c`
 * Clean Start, `g` the claiming gateway's `gateway.id`; a release: `released` the claim's nonce;
 * a refusal (the id is held by another principal): `refused` the claim's nonce, `u` the owner.
 *
 * @module
 */

/** Header naming the client id of a claim or release. */
export const H_CLAIM = "mqtt.claim";

/** A CONNECT's claim on a client id. */
export interface ClaimRecord {
  readonly kind: "claim";
  /** Names this claim (its release names it back). */
  readonly nonce: string;
  /** The claiming principal ("" anonymous). */
  readonly owner: string;
  /** The CONNECT asked for a clean start (a delayed will then goes out at once). */
  readonly cleanStart: boolean;
  /** The claiming gateway's `gateway.id`, for the log. */
  readonly gateway: string;
}

/** The holder's answer: the connection closed and its session's positions stored. */
export interface ReleaseRecord {
  readonly kind: "released";
  readonly nonce: string;
}

/** The holder's refusal: its connection belongs to another principal, and stays. */
export interface RefusalRecord {
  readonly kind: "refused";
  readonly nonce: string;
  /** The principal that holds the id ("" anonymous). */
  readonly owner: string;
}

/** A record read under {@link H_CLAIM}: a claim, an answer, or one this version skips. */
export type ParsedClaim = ClaimRecord | ReleaseRecord | RefusalRecord | {
  readonly kind: "unknown";
};

/** The JSON of a claim. */
export function claimRecordOf(c: Omit<ClaimRecord, "kind">): unknown {
  return { v: 1, claim: c.nonce, u: c.owner, c: c.cleanStart, g: c.gateway };
}

/** The JSON of a release. */
export function releaseRecordOf(nonce: string): unknown {
  return { v: 1, released: nonce };
}

/** The JSON of a refusal of claim `nonce` by the id's owner `owner`. */
export function refusalRecordOf(nonce: string, owner: string): unknown {
  return { v: 1, refused: nonce, u: owner };
}

/** Parses a claim's payload; anything but the shapes of version 1 is "unknown" (skipped). */
export function parseClaim(json: string): ParsedClaim {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(json);
  } catch {
    return { kind: "unknown" };
  }
  if (typeof r !== "object" || r === null || r.v !== 1) return { kind: "unknown" };
  if (typeof r.released === "string") return { kind: "released", nonce: r.released };
  if (typeof r.u !== "string") return { kind: "unknown" };
  if (typeof r.refused === "string") return { kind: "refused", nonce: r.refused, owner: r.u };
  if (typeof r.claim !== "string") return { kind: "unknown" };
  const gateway = typeof r.g === "string" ? r.g : "";
  return { kind: "claim", nonce: r.claim, owner: r.u, cleanStart: r.c === true, gateway };
}
