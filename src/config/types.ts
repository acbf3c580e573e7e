/**
 * The typed, frozen configuration the gateway runs with. Keys, defaults and enums live in
 * `schema.ts` only; the config's type is derived from that table.
 *
 * @module
 */
import type { Permissions } from "../access/permissions.ts";
import type { KEY_SPECS, KeyType } from "./schema.ts";

/** A configured embedded-mode user. */
export interface UserConfig {
  readonly username: string;
  /**
   * `pbkdf2-sha256$<iterations>$<salt b64>$<hash b64>`, made by `hash-password`; null for a
   * user that logs in with a client certificate only.
   */
  readonly passwordHash: string | null;
  /** Client ids this user may use (`{username}` = its name); absent: `auth.client_id_pattern`. */
  readonly clientIdPattern?: string;
  readonly permissions: Permissions;
}

/**
 * Login tokens' permission templates by name (`[jwt_templates.<name>]`), their stream and topic
 * names still holding `{claim}` placeholders.
 */
export type JwtTemplates = ReadonlyMap<string, Permissions>;

/** The value type of a key of type `T`: an enum's values, a list's strings, and so on. */
type ValueOf<T extends KeyType> = T extends { readonly kind: "int" } ? number
  : T extends { readonly kind: "bool" } ? boolean
  : T extends { readonly kind: "enum"; readonly values: readonly (infer V)[] } ? V
  : T extends { readonly kind: "list" } ? readonly string[]
  : string;

/** One key of the table. */
type Spec = (typeof KEY_SPECS)[number];

/** The tables of the config (`gateway`, `listeners`, …), from the keys' first parts. */
type TableName = Spec["key"] extends `${infer T}.${string}` ? T : never;

/** One table: its keys' last parts, each with its value's type. */
type Table<T extends TableName> = {
  readonly [S in Spec as S["key"] extends `${T}.${infer K}` ? K : never]: ValueOf<S["type"]>;
};

/**
 * The whole configuration, derived from the key table (`schema.ts`): field names are the
 * config keys, enums are their values, so the table is the one place a key is written.
 */
export type GatewayConfig =
  & { readonly [T in TableName]: Table<T> }
  & {
    readonly users: readonly UserConfig[];
    /** `[anonymous.permissions]`: anonymous clients' rights per stream/topic; null = none. */
    readonly anonymous_permissions: Permissions | null;
    /** `[jwt_templates.<name>]`: login tokens' permission templates, `{claim}` not filled in. */
    readonly jwt_templates: JwtTemplates;
  };
