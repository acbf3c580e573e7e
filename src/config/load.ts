/**
 * Config loading: TOML text → environment overlay → validation → frozen {@link GatewayConfig}.
 * Pure: the caller reads the file and passes the environment, so tests need no disk.
 *
 * @module
 */
import { parse as parseToml } from "smol-toml";
import { parseErrorLine } from "../base/parse_error.ts";
import { type HostPort, splitHostPort } from "../base/address.ts";
import { IpBlockSet } from "../base/ip.ts";
import { ConfigError } from "./errors.ts";
import { envNameOf, KEY_SPEC_BY_KEY, KEY_SPECS, type KeySpec } from "./schema.ts";
import { closestName } from "./closest_key.ts";
import type { GatewayConfig, UserConfig } from "./types.ts";
import { checkClientIdPattern, parseAnonymous, parseUsers } from "./users.ts";
import type { Permissions } from "../access/permissions.ts";
import { checkJwtKeys, parseJwtTemplates } from "./jwt_config.ts";

type Scalar = number | boolean | string | readonly string[];

/** Inputs of {@link loadConfig}. */
export interface LoadInput {
  /** TOML text of the config file ("" for none). */
  readonly text: string;
  /** Name of the file, for messages. */
  readonly source: string;
  /** Environment variables: `IGGY_MQTT_*` are read, such names in another letter case refused. */
  readonly env: Readonly<Record<string, string>>;
}

const TABLES = new Set(KEY_SPECS.map((s) => s.key.split(".")[0]));
/** Tables that hold no key of the schema but are read by name: `[[users]]`, `[anonymous]`, … */
const OTHER_TABLES = ["users", "anonymous", "jwt_templates"];

/** Every key's environment name → the key. */
const ENV_NAMES: ReadonlyMap<string, string> = new Map(
  KEY_SPECS.map((s) => [envNameOf(s.key), s.key]),
);
const ENV_PREFIX = "IGGY_MQTT_";

/**
 * Refuses the first `IGGY_MQTT_*` name of `env` (in any letter case) that names no key, with
 * the key it was probably meant to be. Names in lower case are refused too: on Linux they are
 * other variables, which the gateway would otherwise ignore without a word.
 */
export function checkEnvNames(env: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(env)) {
    const upper = name.toUpperCase();
    if (!upper.startsWith(ENV_PREFIX) || ENV_NAMES.has(name)) continue;
    const near = ENV_NAMES.has(upper) ? upper : closestName(upper, ENV_NAMES.keys());
    const hint = near === null ? "" : `; did you mean ${near} (${ENV_NAMES.get(near)})?`;
    const what = upper === name
      ? "unknown environment variable for this gateway"
      : "unknown environment variable for this gateway (its names are upper case)";
    throw new ConfigError(name, `${what}${hint}`);
  }
}

/** Loads and validates a configuration; throws {@link ConfigError} naming the key. */
export function loadConfig(input: LoadInput): GatewayConfig {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(withoutCommentLines(input.text)) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError("(file)", `${input.source} is not valid TOML: ${parseErrorLine(err)}`, {
      cause: err,
    });
  }
  const values = new Map<string, Scalar>();
  /** The tables read by name (OTHER_TABLES), as the file gives them. */
  const other: Record<string, unknown> = { users: [], anonymous: null, jwt_templates: {} };
  for (const [table, body] of Object.entries(doc)) {
    if (OTHER_TABLES.includes(table)) {
      other[table] = body;
      continue;
    }
    if (table === "mqtt") {
      // Before wills were published, `[mqtt] will = "refuse" | "accept"` held the policy.
      throw new ConfigError("mqtt.will", 'moved to session.will ("publish" | "refuse")');
    }
    if (!TABLES.has(table)) {
      const near = closestName(table, [...TABLES, ...OTHER_TABLES]);
      const hint = near === null ? "" : `; did you mean [${near}]?`;
      throw new ConfigError(table, `unknown table in ${input.source}${hint}`);
    }
    if (!isPlainObject(body)) throw new ConfigError(table, "must be a table");
    for (const [name, raw] of Object.entries(body)) {
      const key = `${table}.${name}`;
      const spec = KEY_SPEC_BY_KEY.get(key);
      if (!spec) {
        const near = closestName(key, KEY_SPEC_BY_KEY.keys());
        const hint = near === null ? "" : `; did you mean ${near}?`;
        throw new ConfigError(key, `unknown key in ${input.source}${hint}`);
      }
      if (spec.secret && raw !== "") {
        throw new ConfigError(key, `is a secret; set it with ${envNameOf(key)}, not in the file`);
      }
      values.set(key, checkValue(spec, raw));
    }
  }
  for (const spec of KEY_SPECS) {
    const envName = envNameOf(spec.key);
    const raw = input.env[envName];
    if (raw !== undefined) values.set(spec.key, checkValue(spec, fromEnv(spec, raw, envName)));
  }
  checkEnvNames(input.env);
  const get = (key: string): Scalar => values.get(key) ?? KEY_SPEC_BY_KEY.get(key)!.default;
  const anonymous = anonymousOf(other.anonymous, values.has("auth.anonymous_permissions"));
  const templates = parseJwtTemplates(other.jwt_templates);
  const config = { ...assemble(get, parseUsers(other.users), anonymous), jwt_templates: templates };
  crossCheck(config);
  return deepFreeze(config);
}

/**
 * `text` with its comment-only lines emptied (line numbers kept for the parser's errors), unless
 * it holds a multi-line string, where a line starting with `#` may be text. The documented
 * config is mostly comments, and the parser's comment loop, run over all of them, is hot enough
 * for V8's optimizing compiler, whose code is then resident for the life of the process.
 */
function withoutCommentLines(text: string): string {
  if (text.includes('"""') || text.includes("'''")) return text;
  return text.split("\n").map((line) => line.trimStart().startsWith("#") ? "" : line).join("\n");
}

/** `[anonymous.permissions]`, if given; refused beside `auth.anonymous_permissions`. */
function anonymousOf(raw: unknown, rightsSet: boolean): Permissions | null {
  if (raw === null) return null;
  if (rightsSet) {
    throw new ConfigError(
      "auth.anonymous_permissions",
      "is replaced by [anonymous.permissions]; set one of them",
    );
  }
  return parseAnonymous(raw);
}

function fromEnv(spec: KeySpec, raw: string, envName: string): unknown {
  switch (spec.type.kind) {
    case "int": {
      if (!/^-?\d+$/.test(raw.trim())) {
        throw new ConfigError(spec.key, `${envName}="${raw}" is not an integer`);
      }
      return Number(raw.trim());
    }
    case "bool":
      if (raw === "true" || raw === "1") return true;
      if (raw === "false" || raw === "0") return false;
      throw new ConfigError(spec.key, `${envName}="${raw}" is not true or false`);
    case "list":
      return raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
    default:
      return raw;
  }
}

function checkValue(spec: KeySpec, raw: unknown): Scalar {
  const t = spec.type;
  switch (t.kind) {
    case "int": {
      const n = typeof raw === "bigint" ? Number(raw) : raw;
      if (typeof n !== "number" || !Number.isInteger(n)) {
        throw new ConfigError(spec.key, `must be an integer, got ${show(raw)}`);
      }
      if (n < t.min || n > t.max) {
        throw new ConfigError(spec.key, `must be between ${t.min} and ${t.max}, got ${n}`);
      }
      return n;
    }
    case "bool":
      if (typeof raw !== "boolean") {
        throw new ConfigError(spec.key, `must be true or false, got ${show(raw)}`);
      }
      return raw;
    case "enum":
      if (typeof raw !== "string" || !t.values.includes(raw)) {
        throw new ConfigError(spec.key, `must be one of ${t.values.join(", ")}, got ${show(raw)}`);
      }
      return raw;
    case "string":
      if (typeof raw !== "string") throw new ConfigError(spec.key, `must be a string`);
      if (!t.allowEmpty && raw === "") throw new ConfigError(spec.key, "must not be empty");
      return raw;
    case "address":
      if (typeof raw !== "string") throw new ConfigError(spec.key, `must be a "host:port" string`);
      if (raw === "" && t.allowEmpty) return raw;
      for (const one of t.multiple ? raw.split(",") : [raw]) parseAddress(spec.key, one.trim());
      return raw;
    case "list":
      if (!Array.isArray(raw) || !raw.every((v) => typeof v === "string")) {
        throw new ConfigError(spec.key, "must be a list of strings");
      }
      return raw as string[];
  }
}

/** Splits "host:port" (IPv6 as "[::1]:1883"); throws naming the key. */
export function parseAddress(key: string, value: string): HostPort {
  const address = splitHostPort(value);
  if (address === null) throw new ConfigError(key, `must be "host:port", got "${value}"`);
  if (address.port > 65535) {
    throw new ConfigError(key, `port must be 0..65535, got ${address.port}`);
  }
  return address;
}

function assemble(
  get: (k: string) => Scalar,
  users: UserConfig[],
  anonymous: Permissions | null,
): Omit<GatewayConfig, "jwt_templates"> {
  /** One table of the config: each of its keys from the schema, with its checked value. */
  type Name = Exclude<keyof GatewayConfig, "users" | "anonymous_permissions" | "jwt_templates">;
  const table = <T extends Name>(name: T): GatewayConfig[T] => {
    const out: Record<string, Scalar> = {};
    for (const spec of KEY_SPECS) {
      const [t, k] = spec.key.split(".");
      if (t === name) out[k] = get(spec.key);
    }
    return out as GatewayConfig[T];
  };
  return {
    gateway: table("gateway"),
    listeners: table("listeners"),
    http: table("http"),
    mqtt5: table("mqtt5"),
    session: table("session"),
    retained: table("retained"),
    auth: table("auth"),
    mapping: table("mapping"),
    log: table("log"),
    embedded: table("embedded"),
    iggy: table("iggy"),
    forward: table("forward"),
    limits: table("limits"),
    users,
    anonymous_permissions: anonymous,
  };
}

/** A token an attacker on the box could guess is no protection: admin writes need a long one. */
const MIN_ADMIN_TOKEN_CHARS = 16;

function crossCheck(c: GatewayConfig): void {
  const token = c.http.admin_token;
  if (token !== "" && token.length < MIN_ADMIN_TOKEN_CHARS) {
    throw new ConfigError(
      "http.admin_token",
      `is ${token.length} characters; use at least ${MIN_ADMIN_TOKEN_CHARS} (openssl rand -hex 24)`,
    );
  }
  if (c.listeners.tcp === "" && c.listeners.tls === "") {
    throw new ConfigError(
      "listeners.tcp",
      "at least one of listeners.tcp and listeners.tls is needed",
    );
  }
  const versions = c.listeners.mqtt_versions;
  if (versions.length === 0 || versions.some((v) => v !== "3.1.1" && v !== "5")) {
    throw new ConfigError(
      "listeners.mqtt_versions",
      `must list "3.1.1", "5" or both, got ${JSON.stringify(versions)}`,
    );
  }
  if (c.listeners.wss !== "" && c.listeners.tls === "") {
    for (const k of ["tls_cert_file", "tls_key_file"] as const) {
      if (c.listeners[k] === "") {
        throw new ConfigError(`listeners.${k}`, "is required when listeners.wss is set");
      }
    }
  }
  if (c.listeners.tls !== "") {
    if (c.listeners.tls_cert_file === "") {
      throw new ConfigError("listeners.tls_cert_file", "is required when listeners.tls is set");
    }
    if (c.listeners.tls_key_file === "") {
      throw new ConfigError("listeners.tls_key_file", "is required when listeners.tls is set");
    }
    if (c.listeners.tls_client_auth !== "none" && c.listeners.tls_client_ca_file === "") {
      throw new ConfigError(
        "listeners.tls_client_ca_file",
        `is required when listeners.tls_client_auth is "${c.listeners.tls_client_auth}"`,
      );
    }
  }
  checkClientIdPattern("auth.client_id_pattern", c.auth.client_id_pattern);
  checkJwtKeys(c);
  checkIpBlocks("listeners.proxy_protocol_from", c.listeners.proxy_protocol_from);
  checkIggyUse(c);
  checkLimits(c.limits);
  if (c.gateway.backend === "embedded") checkStoreFitsPacket(c);
  const names = new Set<string>();
  for (const u of c.users) {
    if (names.has(u.username)) throw new ConfigError("users", `duplicate user "${u.username}"`);
    names.add(u.username);
  }
}

/** A list of IPs and CIDR blocks; the first entry that is neither is named. */
function checkIpBlocks(key: string, entries: readonly string[]): void {
  try {
    new IpBlockSet(entries);
  } catch (err) {
    throw new ConfigError(key, (err as Error).message);
  }
}

/** The byte bounds that must hold one another. */
function checkLimits(l: GatewayConfig["limits"]): void {
  if (l.max_outbound_queue_bytes < l.max_outbound_queue_bytes_per_client) {
    throw new ConfigError(
      "limits.max_outbound_queue_bytes",
      "must be at least limits.max_outbound_queue_bytes_per_client",
    );
  }
  if (l.max_outbound_queue_bytes < l.max_packet_bytes) {
    // A copy of the largest message must fit the global budget, or a backlog holding one
    // waits for room that never comes.
    throw new ConfigError(
      "limits.max_outbound_queue_bytes",
      "must be at least limits.max_packet_bytes",
    );
  }
  if (l.max_partial_packet_bytes_total < l.max_packet_bytes + 4) {
    throw new ConfigError(
      "limits.max_partial_packet_bytes_total",
      "must be at least limits.max_packet_bytes + 4 (one largest packet but its last byte)",
    );
  }
}

/**
 * The embedded log must hold one message of the largest size with its record (its page
 * rounded up, and one page more for the record and envelope headers): a smaller bound refuses
 * those messages forever, whatever retention frees.
 */
function checkStoreFitsPacket(c: GatewayConfig): void {
  const least = Math.ceil(c.limits.max_packet_bytes / 4096) * 4096 + 4096;
  if (c.embedded.max_store_bytes >= least) return;
  throw new ConfigError(
    "embedded.max_store_bytes",
    `is ${c.embedded.max_store_bytes}, too small for one message of limits.max_packet_bytes ` +
      `(${c.limits.max_packet_bytes}) even when empty: at least ${least} (well above, to hold ` +
      "a backlog), or lower limits.max_packet_bytes",
  );
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/** A value as a message shows it; TOML tables have no prototype (String() would throw). */
function show(v: unknown): string {
  if (typeof v === "string") return `"${v}"`;
  if (v instanceof Date) return "a date";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object" && v !== null) return "a table";
  return String(v);
}

function deepFreeze<T>(o: T): T {
  if (typeof o === "object" && o !== null && !(o instanceof Map) && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}

export { isPlainObject };

/** Where messages go to Iggy (the backend, or forward mode's uplink): what Iggy needs. */
function checkIggyUse(c: GatewayConfig): void {
  if (c.forward.enabled && c.gateway.backend !== "embedded") {
    throw new ConfigError(
      "forward.enabled",
      'needs gateway.backend = "embedded" (its log is the buffer)',
    );
  }
  if (c.gateway.backend === "iggy" || c.forward.enabled) {
    if (c.limits.max_topic_bytes > 255) {
      throw new ConfigError(
        "limits.max_topic_bytes",
        "cannot exceed 255 when messages go to Iggy (Iggy caps header values at 255 bytes)",
      );
    }
    if (c.iggy.password === "" && c.iggy.token === "") {
      throw new ConfigError(
        "iggy.password",
        `Iggy (backend or forward) needs ${envNameOf("iggy.password")} or ${
          envNameOf("iggy.token")
        }`,
      );
    }
  }
}
