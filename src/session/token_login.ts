/**
 * Login with a signed token in the CONNECT password: the token is verified against the keys of
 * `auth.jwt_jwks_file` / `auth.jwt_hmac_secret` (`access/jwt.ts`), its principal is the claim
 * `auth.jwt_principal_claim`, and its rights come from the token itself: the claim
 * `auth.jwt_permissions_claim` in a `[[users]]` entry's permissions form, or else a
 * `[jwt_templates.<name>]` template (named by `auth.jwt_template_claim`, or
 * `auth.jwt_default_template`) with its `{claim}` placeholders filled in from the token. No
 * backend is asked: in Iggy mode the gateway's own account appends, and these rights are the
 * ones checked.
 *
 * @module
 */
import type { GatewayConfig, JwtTemplates } from "../config/types.ts";
import type { Principal } from "../log/port.ts";
import { verifyJwt } from "../access/jwt.ts";
import type { JwtKeySet } from "../access/jwt_keys.ts";
import type { Permissions, StreamPermissions, TopicPermissions } from "../access/permissions.ts";
import { parsePermissions } from "../config/users.ts";
import { ConfigError } from "../config/errors.ts";
import { PLACEHOLDER } from "../config/jwt_config.ts";
import { utf8Length } from "../base/utf8.ts";

/** A principal that logged in with a token: it holds until `tokenValidUntilMs` (wall clock). */
export interface TokenPrincipal extends Principal {
  readonly tokenValidUntilMs: number;
}

/** Outcome of a token login: the principal, or the reason it was refused. */
export type TokenDecision =
  | { readonly ok: true; readonly principal: TokenPrincipal }
  | { readonly ok: false; readonly reason: string };

/** Longest reason quoted from a claim's problem. */
const REASON_CHARS = 200;

/** "eyJ": base64url of `{"`, how every JWS header begins. */
const TOKEN_PREFIX = [0x65, 0x79, 0x4a];

/** True when a CONNECT password has a token's shape (its first bytes). */
export function looksLikeToken(password: Uint8Array): boolean {
  return TOKEN_PREFIX.every((b, i) => password[i] === b);
}

/** Verifies tokens and turns their claims into principals. */
export class TokenLogin {
  readonly #auth: GatewayConfig["auth"];
  readonly #keys: JwtKeySet;
  readonly #templates: JwtTemplates;
  readonly #wallNow: () => number;

  constructor(
    auth: GatewayConfig["auth"],
    keys: JwtKeySet,
    templates: JwtTemplates,
    wallNow: () => number = Date.now,
  ) {
    this.#auth = auth;
    this.#keys = keys;
    this.#templates = templates;
    this.#wallNow = wallNow;
  }

  /** The token login of `config` with `keys` (null: no key configured, no token login). */
  static of(config: GatewayConfig, keys: JwtKeySet | null): TokenLogin | null {
    return keys === null ? null : new TokenLogin(config.auth, keys, config.jwt_templates);
  }

  /** {@link looksLikeToken}, for callers that hold a token login but do not import this module. */
  looksLikeToken(password: Uint8Array): boolean {
    return looksLikeToken(password);
  }

  /** Longest token accepted (bytes), checked before anything is decoded. */
  get maxBytes(): number {
    return this.#auth.jwt_max_bytes;
  }

  /**
   * Verifies `token` and builds its principal. A CONNECT username, if sent, must be that
   * principal (as with a client certificate): one name per connection in logs and ownership.
   */
  async login(token: string, username: string | null): Promise<TokenDecision> {
    const a = this.#auth;
    const rules = { issuer: a.jwt_issuer, audience: a.jwt_audience, leewayS: a.jwt_leeway_s };
    const v = await verifyJwt(token, this.#keys, rules, this.#wallNow());
    if (!v.ok) return refuse(`token refused: ${v.reason}`);
    const name = v.claims[a.jwt_principal_claim];
    if (typeof name !== "string" || name === "" || utf8Length(name) > 255) {
      return refuse(`token refused: claim "${a.jwt_principal_claim}" is not a 1-255 byte string`);
    }
    if (username !== null && username !== "" && username !== name) {
      return refuse(`CONNECT username "${username}" is not the token's principal "${name}"`);
    }
    const permissions = this.#rightsOf(v.claims);
    if (typeof permissions === "string") return refuse(`token refused: ${permissions}`);
    const principal = { username: name, permissions, tokenValidUntilMs: v.validUntilMs };
    return { ok: true, principal: Object.freeze(principal) };
  }

  /** The token's rights: its permissions claim, else its template; or why it has none. */
  #rightsOf(claims: Readonly<Record<string, unknown>>): Permissions | string {
    const a = this.#auth;
    const own = claims[a.jwt_permissions_claim];
    if (own !== undefined) {
      try {
        return parsePermissions(own, a.jwt_permissions_claim);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        const detail = err.message.slice(err.message.indexOf(": ") + 2);
        return `claim ${err.key} ${detail}`.slice(0, REASON_CHARS);
      }
    }
    const named = claims[a.jwt_template_claim];
    if (named !== undefined && typeof named !== "string") {
      return `claim "${a.jwt_template_claim}" is not a string`;
    }
    const name = named ?? a.jwt_default_template;
    if (name === "") {
      return `grants no rights (no "${a.jwt_permissions_claim}" or "${a.jwt_template_claim}" claim, no auth.jwt_default_template)`;
    }
    const template = this.#templates.get(name);
    if (template === undefined) return `template "${name.slice(0, 64)}" does not exist`;
    return fillTemplate(template, claims, name);
  }
}

/** The template with every `{claim}` in its stream and topic names replaced by the claim. */
export function fillTemplate(
  template: Permissions,
  claims: Readonly<Record<string, unknown>>,
  name: string,
): Permissions | string {
  let missing: string | null = null;
  const fill = (s: string): string =>
    s.replace(PLACEHOLDER, (_, claim: string) => {
      const v = claims[claim];
      if (typeof v === "string" && v !== "") return v;
      if (typeof v === "number" && Number.isFinite(v)) return String(v);
      missing ??= claim;
      return "";
    });
  const streams = new Map<string, StreamPermissions>();
  for (const [stream, s] of template.streams) {
    const topics = new Map<string, TopicPermissions>();
    for (const [topic, t] of s.topics) topics.set(fill(topic), t);
    streams.set(fill(stream), { ...s, topics });
  }
  if (missing !== null) {
    return `template "${name}" needs claim "${missing}" (a string or number), which the token lacks`;
  }
  for (const [stream, s] of streams) {
    for (const n of [stream, ...s.topics.keys()]) {
      if (utf8Length(n) > 255) return `template "${name}" makes a name over 255 bytes`;
    }
  }
  return { global: template.global, streams };
}

function refuse(reason: string): TokenDecision {
  return { ok: false, reason };
}
