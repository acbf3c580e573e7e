/**
 * The token login's part of the configuration, checked at load (no file read): the
 * `auth.jwt_*` keys that must agree with one another, and the `[jwt_templates.<name>]` tables:
 * permission templates for login tokens, in a
 * `[[users]]` entry's permissions form, whose stream and topic names may hold `{claim}`: the
 * value of that claim of the token, filled in at login. With a map rule sending
 * `devices/<id>/…` to stream "devices", topic "<id>", the template
 *
 * ```toml
 * [jwt_templates.device.permissions.streams.devices.topics."{sub}"]
 * send_messages = true
 * ```
 *
 * lets a device send to its own `devices/<sub>/…` only.
 *
 * @module
 */
import { ConfigError } from "./errors.ts";
import { parsePermissions } from "./users.ts";
import type { Permissions } from "../access/permissions.ts";
import type { GatewayConfig, JwtTemplates } from "./types.ts";
import { utf8Length } from "../base/utf8.ts";

/** Shortest HMAC secret accepted: the hash's own length (RFC 7518 §3.2). */
export const MIN_HMAC_SECRET_BYTES = 32;

/** A template's placeholders: `{` a claim name `}`. */
export const PLACEHOLDER = /\{([^{}]*)\}/g;
const CLAIM_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Parses the `jwt_templates` table of the config document. */
export function parseJwtTemplates(raw: unknown): JwtTemplates {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new ConfigError("jwt_templates", "must be a table of [jwt_templates.<name>] tables");
  }
  const out = new Map<string, Permissions>();
  for (const [name, body] of Object.entries(raw)) {
    const at = `jwt_templates.${name}`;
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new ConfigError(at, "must be a table");
    }
    for (const k of Object.keys(body)) {
      if (k !== "permissions") throw new ConfigError(`${at}.${k}`, "unknown key");
    }
    const permissions = parsePermissions(
      (body as { permissions?: unknown }).permissions ?? {},
      `${at}.permissions`,
    );
    for (const [stream, s] of permissions.streams) {
      checkPlaceholders(`${at}.permissions.streams.${stream}`, stream);
      for (const topic of s.topics.keys()) {
        checkPlaceholders(`${at}.permissions.streams.${stream}.topics.${topic}`, topic);
      }
    }
    out.set(name, permissions);
  }
  return out;
}

/** Every `{…}` must name a claim; a lone brace is refused (it would be taken literally). */
function checkPlaceholders(at: string, name: string): void {
  for (const m of name.matchAll(PLACEHOLDER)) {
    if (!CLAIM_NAME.test(m[1])) {
      throw new ConfigError(at, `"{${m[1]}}" does not name a claim (1-64 of A-Z a-z 0-9 _ . : -)`);
    }
  }
  if (/[{}]/.test(name.replace(PLACEHOLDER, ""))) {
    throw new ConfigError(at, "has an unmatched { or }");
  }
}

/** Refuses a short HMAC secret and a default template that names no `[jwt_templates]` table. */
export function checkJwtKeys(c: GatewayConfig): void {
  const a = c.auth;
  if (a.jwt_hmac_secret !== "" && utf8Length(a.jwt_hmac_secret) < MIN_HMAC_SECRET_BYTES) {
    throw new ConfigError(
      "auth.jwt_hmac_secret",
      `must be at least ${MIN_HMAC_SECRET_BYTES} bytes (a shorter HS256 secret can be guessed)`,
    );
  }
  const fallback = a.jwt_default_template;
  if (fallback !== "" && !c.jwt_templates.has(fallback)) {
    throw new ConfigError(
      "auth.jwt_default_template",
      `names "${fallback}", which is no [jwt_templates.${fallback}] table`,
    );
  }
}
