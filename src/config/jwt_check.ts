/**
 * The login-token keys that must agree with one another, checked at load (no file read).
 *
 * @module
 */
import { ConfigError } from "./errors.ts";
import type { GatewayConfig } from "./types.ts";
import { MIN_HMAC_SECRET_BYTES } from "../access/jwt_keys.ts";
import { utf8Length } from "../base/utf8.ts";

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
