/**
 * The embedded backend's users: the configured `[[users]]`, checked at CONNECT.
 *
 * @module
 */
import type { UserConfig } from "../../config/types.ts";
import { verifyPassword } from "../../access/password.ts";
import type { AuthResult, Principal } from "../port.ts";
import { dummyPasswordHash } from "./_validate.ts";

/** Configured users by name. */
export class EmbeddedUsers {
  #users: ReadonlyMap<string, UserConfig>;
  /** Hash checked for unknown users, made like the configured users' hashes at start. */
  readonly #dummyHash: () => string;

  constructor(users: readonly UserConfig[]) {
    this.#users = new Map(users.map((u) => [u.username, u]));
    this.#dummyHash = () => dummyPasswordHash(users);
  }

  /** Replaces the users; connections keep the permissions they were granted. */
  set(users: readonly UserConfig[]): void {
    this.#users = new Map(users.map((u) => [u.username, u]));
  }

  /**
   * Checks a user's password; unknown users, and users without a password (certificate only),
   * cost the same hash work as known ones.
   */
  async authenticate(username: string, password: string): Promise<AuthResult> {
    const user = this.#users.get(username);
    const hash = user?.passwordHash ?? this.#dummyHash();
    const ok = await verifyPassword(password, hash);
    if (!user || user.passwordHash === null || !ok) return { ok: false, reason: "bad_credentials" };
    return { ok: true, principal: principalOf(user) };
  }

  /** The user named by a verified client certificate, with no password to check. */
  principalOf(username: string): AuthResult {
    const user = this.#users.get(username);
    return user ? { ok: true, principal: principalOf(user) } : { ok: false, reason: "unknown" };
  }
}

function principalOf(user: UserConfig): Principal {
  const { username, permissions, clientIdPattern } = user;
  return clientIdPattern === undefined
    ? { username, permissions }
    : { username, permissions, clientIdPattern };
}
