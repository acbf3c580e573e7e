/**
 * Authentication of a CONNECT: credentials are checked by the backend
 * (config users with salted hashes in embedded mode, Iggy users in Iggy mode), or, when token
 * keys are configured, a password with a token's shape is a signed token checked by
 * {@link TokenLogin}; anonymous clients only when configured and only from the configured
 * source addresses.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { ConnackCode } from "../codec/encoder.ts";
import type { ConnectPacket } from "../codec/packets.ts";
import type { LogBackend, Principal } from "../log/port.ts";
import { hasAnyDataRight, NO_GLOBAL_PERMISSIONS, type Permissions } from "../access/permissions.ts";
import type { TokenLogin } from "./token_login.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as TokenSetup from "./token_setup.ts";

/** Outcome of authenticating a CONNECT. */
export type AuthDecision =
  | {
    readonly ok: true;
    readonly principal: Principal;
    /** No credentials proven (an anonymous login): a source's failed logins stand. */
    readonly anonymous?: true;
  }
  | { readonly ok: false; readonly connackCode: number; readonly reason: string };

/** Anonymous principal permissions, as configured. */
function anonymousPermissions(mode: GatewayConfig["auth"]["anonymous_permissions"]): Permissions {
  return {
    global: {
      ...NO_GLOBAL_PERMISSIONS,
      send_messages: mode !== "poll",
      poll_messages: mode !== "send",
    },
    streams: new Map(),
  };
}

function anonymousPrincipal(auth: GatewayConfig["auth"], table: Permissions | null): Principal {
  return Object.freeze({
    username: "",
    permissions: table ?? anonymousPermissions(auth.anonymous_permissions),
  });
}

/** What logging in takes of the log. */
type Logins = Pick<LogBackend, "authenticate" | "principalOf">;

/** Checks CONNECT credentials against the backend and the anonymous rules. */
export class Authenticator {
  #auth: GatewayConfig["auth"];
  #backend: Logins;
  /**
   * One anonymous principal for every anonymous connection (it depends on the config only):
   * one per connection would be four objects held by each idle connection.
   */
  #anonymous: Principal;
  /** Which certificate name is the principal (`listeners.tls_identity`), for messages. */
  readonly #identity: string;
  /** Token login; null while no token key is configured. */
  #tokens: TokenLogin | null = null;

  /** @param anonymous `[anonymous.permissions]`, replacing `auth.anonymous_permissions`. */
  constructor(
    auth: GatewayConfig["auth"],
    backend: Logins,
    identity = "cn",
    anonymous: Permissions | null = null,
  ) {
    this.#auth = auth;
    this.#backend = backend;
    this.#anonymous = anonymousPrincipal(auth, anonymous);
    this.#identity = identity;
  }

  /** The authenticator of `config`: its auth keys, anonymous rights and certificate name. */
  static of(config: GatewayConfig, backend: Logins): Authenticator {
    const l = config.listeners;
    return new Authenticator(config.auth, backend, l.tls_identity, config.anonymous_permissions);
  }

  /**
   * The token login of `config`: its keys read and imported (`auth.jwt_jwks_file`,
   * `auth.jwt_hmac_secret`); null when neither is set. Rejects with a one-line OperatorError
   * naming the file; nothing is swapped yet.
   */
  static async readTokens(config: GatewayConfig): Promise<TokenLogin | null> {
    const { jwt_jwks_file, jwt_hmac_secret } = config.auth;
    if (jwt_jwks_file === "" && jwt_hmac_secret === "") return null;
    const setup: typeof TokenSetup = await import(
      new URL("./token_setup.ts", import.meta.url).href
    );
    return await setup.readTokenLogin(config);
  }

  /** Swaps the auth config (hot reload); `tokens` as read by {@link readTokens}, absent: kept. */
  reload(
    auth: GatewayConfig["auth"],
    anonymous: Permissions | null = null,
    tokens?: TokenLogin | null,
  ): void {
    this.#auth = auth;
    this.#anonymous = anonymousPrincipal(auth, anonymous);
    if (tokens !== undefined) this.#tokens = tokens;
  }

  /** Takes the token login (at start). */
  useTokens(tokens: TokenLogin | null): void {
    this.#tokens = tokens;
  }

  /**
   * A CONNECT over a verified client certificate (`certificateName` given) is the user that
   * name names, with no password checked; a CONNECT username, if sent, must be that name.
   * Otherwise a token (when token keys are configured and the password has a token's shape),
   * username/password, or anonymous.
   */
  async authenticate(
    p: ConnectPacket,
    remoteAddress: string,
    certificateName?: string,
  ): Promise<AuthDecision> {
    if (certificateName !== undefined) return await this.#byCertificate(p, certificateName);
    // A token may come without a username (MQTT 5 allows a password alone).
    const tokens = this.#tokens;
    if (tokens !== null && p.password !== null && p.username !== this.#auth.pat_username) {
      if (tokens.looksLikeToken(p.password)) return await byToken(tokens, p.password, p.username);
    }
    if (p.username === null) return this.#anonymousFrom(remoteAddress);
    const password = p.password === null ? "" : new TextDecoder().decode(p.password);
    const result = await this.#backend.authenticate(p.username, password);
    if (!result.ok) {
      if (result.reason === "unavailable") {
        return deny(ConnackCode.SERVER_UNAVAILABLE, "backend unavailable for authentication");
      }
      return deny(ConnackCode.BAD_USERNAME_OR_PASSWORD, `authentication failed (${result.reason})`);
    }
    return withDataRights(result.principal);
  }

  #anonymousFrom(remoteAddress: string): AuthDecision {
    if (!this.#auth.allow_anonymous) {
      return deny(ConnackCode.NOT_AUTHORIZED, "anonymous access is disabled");
    }
    const sources = this.#auth.anonymous_sources;
    if (!sources.includes("*") && !sources.includes(remoteAddress)) {
      return deny(
        ConnackCode.NOT_AUTHORIZED,
        `anonymous access is not allowed from ${remoteAddress}`,
      );
    }
    return { ok: true, principal: this.#anonymous, anonymous: true };
  }

  async #byCertificate(p: ConnectPacket, name: string): Promise<AuthDecision> {
    if (name === "") {
      const field = this.#identity;
      return deny(ConnackCode.NOT_AUTHORIZED, `client certificate has no ${field} name`);
    }
    if (p.username !== null && p.username !== name) {
      return deny(
        ConnackCode.BAD_USERNAME_OR_PASSWORD,
        `CONNECT username "${p.username}" is not the client certificate's name "${name}"`,
      );
    }
    const result = await this.#backend.principalOf(name);
    if (result.ok) return withDataRights(result.principal);
    if (result.reason === "unavailable") {
      return deny(ConnackCode.SERVER_UNAVAILABLE, "backend unavailable for authentication");
    }
    return deny(
      ConnackCode.NOT_AUTHORIZED,
      `client certificate names "${name}", which is no ${
        result.reason === "inactive" ? "active " : ""
      }user`,
    );
  }
}

/** A token login; an oversized token is refused before a byte of it is decoded. */
async function byToken(
  tokens: TokenLogin,
  token: Uint8Array,
  username: string | null,
): Promise<AuthDecision> {
  if (token.length > tokens.maxBytes) {
    return deny(
      ConnackCode.BAD_USERNAME_OR_PASSWORD,
      `token refused: ${token.length} bytes, over auth.jwt_max_bytes (${tokens.maxBytes})`,
    );
  }
  const result = await tokens.login(new TextDecoder().decode(token), username);
  if (!result.ok) return deny(ConnackCode.BAD_USERNAME_OR_PASSWORD, result.reason);
  return withDataRights(result.principal);
}

function withDataRights(principal: Principal): AuthDecision {
  if (!hasAnyDataRight(principal.permissions)) {
    return deny(ConnackCode.NOT_AUTHORIZED, "user has no send or poll rights");
  }
  return { ok: true, principal };
}

function deny(connackCode: number, reason: string): AuthDecision {
  return { ok: false, connackCode, reason };
}
