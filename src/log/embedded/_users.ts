/**
 * The embedded backend's users: the configured `[[users]]`, checked at CONNECT.
 *
 * @module
 */
import type { UserConfig } from "../../config/types.ts";
import { verifyPassword } from "../../access/password.ts";
import type { AuthResult } from "../port.ts";
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

  /** Checks a user's password; unknown users cost the same hash work as known ones. */
  async authenticate(username: string, password: string): Promise<AuthResult> {
    const user = this.#users.get(username);
    const ok = await verifyPassword(password, user?.passwordHash ?? this.#dummyHash());
    if (!user || !ok) return { ok: false, reason: "bad_credentials" };
    return { ok: true, principal: { username: user.username, permissions: user.permissions } };
  }
}
