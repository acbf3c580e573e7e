/**
 * Every scalar configuration key, its one default, unit, environment name and bounds.
 * This table is the single place where defaults are written; `config/gateway.toml`
 * documents the same keys (a test checks that they agree).
 *
 * Environment names: `IGGY_MQTT_` + the dotted key upper-cased with `.` → `_`,
 * e.g. `limits.max_packet_bytes` → `IGGY_MQTT_LIMITS_MAX_PACKET_BYTES`.
 *
 * @module
 */

/** How a key's value is typed and bounded. */
export type KeyType =
  | { readonly kind: "int"; readonly min: number; readonly max: number }
  | { readonly kind: "bool" }
  | { readonly kind: "string"; readonly allowEmpty: boolean }
  | { readonly kind: "enum"; readonly values: readonly string[] }
  | {
    readonly kind: "address";
    readonly allowEmpty: boolean;
    /** Several comma-separated addresses (the nodes of one cluster). */
    readonly multiple?: boolean;
  }
  | { readonly kind: "list" };

/** One documented configuration key. */
export interface KeySpec {
  readonly key: string;
  readonly type: KeyType;
  readonly default: number | boolean | string | readonly string[];
  readonly doc: string;
  /** Secrets may come from the environment only, never from the file, and are never logged. */
  readonly secret?: boolean;
}

// Each helper keeps its literal type (an enum keeps its values), so that the config's type can
// be derived from the table below (`types.ts`).
const int = (min: number, max: number) => ({ kind: "int", min, max }) as const;
const bool = { kind: "bool" } as const;
const str = { kind: "string", allowEmpty: false } as const;
const optStr = { kind: "string", allowEmpty: true } as const;
const optAddr = { kind: "address", allowEmpty: true } as const;
const addrs = { kind: "address", allowEmpty: false, multiple: true } as const;
const list = { kind: "list" } as const;
const oneOf = <const V extends readonly string[]>(...values: V) =>
  ({ kind: "enum", values }) as const;

const MAX_I32 = 2 ** 31 - 1;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** The schema, in the order the example config lists it. */
export const KEY_SPECS = [
  // [gateway]
  {
    key: "gateway.id",
    type: str,
    default: "gateway-1",
    doc: "Identity of this gateway; its consumer name in the log derives from it.",
  },
  {
    key: "gateway.backend",
    type: oneOf("embedded", "iggy"),
    default: "embedded",
    doc: "Log backend: embedded (local segment files and a SQLite catalog) or iggy.",
  },
  {
    key: "gateway.log_level",
    type: oneOf("debug", "info", "warn", "error"),
    default: "info",
    doc: "Lowest log level written (JSON lines on stdout).",
  },
  {
    key: "gateway.drain_timeout_ms",
    type: int(0, 600_000),
    default: 10_000,
    doc:
      "On SIGTERM/SIGINT, the bound of the whole stop (ms): appends in flight get up to half of it to finish and be acknowledged, then positions, session records and the forwarder's send in flight are stored; at the bound the process exits with what is stored by then (logged).",
  },

  // [listeners]
  {
    key: "listeners.tcp",
    type: optAddr,
    default: "0.0.0.0:1883",
    doc: "MQTT over TCP, host:port; empty disables it. Port 0 picks a free port.",
  },
  {
    key: "listeners.tcp_socket_layer",
    type: oneOf("auto", "epoll", "node"),
    default: "auto",
    doc:
      'What drives the TCP listener\'s sockets: "epoll" (libc through Deno FFI, Linux; about half the RSS per idle connection; needs the permission set gateway-epoll: deno task start:epoll or the -epoll build), "node" (node:net), "auto" = epoll where it can be used (Linux, FFI permitted, an IP or localhost to bind), else node with one log line. TLS always uses node:tls.',
  },
  {
    key: "listeners.tls",
    type: optAddr,
    default: "",
    doc: "MQTT over TLS, host:port (e.g. 0.0.0.0:8883); empty disables it.",
  },
  {
    key: "listeners.tls_cert_file",
    type: optStr,
    default: "",
    doc: "PEM certificate chain for the TLS listener.",
  },
  {
    key: "listeners.tls_key_file",
    type: optStr,
    default: "",
    doc: "PEM private key for the TLS listener.",
  },
  {
    key: "listeners.tls_client_auth",
    type: oneOf("none", "optional", "require"),
    default: "none",
    doc:
      'Client certificates on the TLS listener: "none" (not asked for), "optional" (asked for; a client without one logs in with username/password), "require" (a handshake without a certificate that verifies fails). A verified certificate\'s name (listeners.tls_identity) is the principal; no password is checked.',
  },
  {
    key: "listeners.tls_client_ca_file",
    type: optStr,
    default: "",
    doc:
      "PEM CA certificate(s) that client certificates must chain to; required unless tls_client_auth is none. Reloaded on SIGHUP.",
  },
  {
    key: "listeners.tls_identity",
    type: oneOf("cn", "san_dns", "san_uri", "san_email"),
    default: "cn",
    doc:
      "Which name of a client certificate is the principal: the subject CN, or the first DNS name, URI or e-mail address of its subject alternative names.",
  },
  {
    key: "listeners.tls_crl_file",
    type: optStr,
    default: "",
    doc:
      "PEM or DER certificate revocation list(s) of the client CA; a certificate it lists is refused right after the handshake. Empty = no revocation check. Reloaded on SIGHUP.",
  },
  {
    key: "listeners.mqtt_versions",
    type: list,
    default: ["3.1.1", "5"],
    doc:
      'MQTT versions the MQTT listeners speak: "3.1.1", "5" or both; another version\'s CONNECT gets CONNACK 0x01 / 0x84.',
  },
  {
    key: "listeners.http",
    type: optAddr,
    default: "127.0.0.1:8080",
    doc: "Health, readiness and metrics HTTP, host:port; empty disables it.",
  },
  {
    key: "http.admin_token",
    type: optStr,
    default: "",
    doc:
      "Bearer token the HTTP listener's admin write actions (disconnect a client, drop a stored session, change the log level) require, even from localhost (environment only; at least 16 characters, e.g. openssl rand -hex 24). Empty: every write action is refused.",
    secret: true,
  },
  {
    key: "listeners.ws",
    type: optAddr,
    default: "",
    doc:
      "MQTT over WebSocket (browsers, dashboards), host:port; empty disables it. Same auth, limits and connection cap as TCP.",
  },
  {
    key: "listeners.wss",
    type: optAddr,
    default: "",
    doc:
      "MQTT over secure WebSocket, host:port; empty disables it. Uses listeners.tls_cert_file and tls_key_file; a SIGHUP swaps them (closing the open wss connections: clients reconnect).",
  },
  {
    key: "listeners.ws_path",
    type: str,
    default: "/mqtt",
    doc: "Path the WebSocket listener answers upgrades on (subprotocol mqtt).",
  },
  {
    key: "listeners.ws_allowed_origins",
    type: list,
    default: [],
    doc:
      "Origins a browser may open a WebSocket from; empty: every origin is accepted (and clients that send none).",
  },
  {
    key: "listeners.proxy_protocol_from",
    type: list,
    default: [],
    doc:
      "Load balancers (IPs or CIDR blocks, e.g. [\"10.0.0.0/8\"]) whose connections start with a PROXY protocol header (v1 or v2) on the TCP and TLS listeners (for TLS before the handshake), and whose X-Forwarded-For is taken on the WebSocket listeners: the client's address it names is then the connection's for limits, anonymous sources and logs. A connection from these without a valid header within limits.connect_timeout_ms is closed; a PROXY header from any other source is refused. Empty: off (a PROXY header is then an MQTT protocol error). A SIGHUP that changes it is refused: restart.",
  },

  // [mqtt5]
  {
    key: "mqtt5.puback_coordinates",
    type: oneOf("on_request", "always", "never"),
    default: "on_request",
    doc:
      "A successful MQTT 5 QoS 1 PUBACK (QoS 2: PUBREC) carries the log coordinates as user properties iggy.stream, iggy.topic, iggy.partition, iggy.offset: to clients whose CONNECT has the user property iggy-coordinates = 1 (on_request), to every client (always), or never; never to a client that sent Request Problem Information 0.",
  },
  {
    key: "mqtt5.subscribe_refusal",
    type: oneOf("specific", "unspecified"),
    default: "specific",
    doc:
      'SUBACK of a refused MQTT 5 subscription: "specific" gives the reason (0x87 not authorized, 0x8F filter invalid, 0x97 quota, …); "unspecified" always 0x80, for clients that accept no other code (the Paho test client).',
  },
  {
    key: "mqtt5.server_reference",
    type: optStr,
    default: "",
    doc:
      "Where an MQTT 5 client should reconnect when this gateway stops (SIGTERM/SIGINT), e.g. the load balancer's host:port: its connections get DISCONNECT 0x9C Use another server with this as the Server Reference property. Empty: DISCONNECT 0x8B Server shutting down, without a reference. MQTT 3.1.1 clients have no such packet: their connections are closed.",
  },
  {
    key: "mqtt5.max_will_delay_s",
    type: int(0, 86_400),
    default: 300,
    doc:
      "Will delay interval longer than this is shortened to it (s); the will goes out at once when the session ends first.",
  },

  // [session]
  {
    key: "session.will",
    type: oneOf("publish", "refuse"),
    default: "publish",
    doc:
      "CONNECT with a will: publish it when the connection ends without DISCONNECT, or refuse (CONNACK 5).",
  },
  {
    key: "session.expiry_s",
    type: int(1, MAX_I32),
    default: 86_400,
    doc:
      "A stored session (MQTT 3.1.1 clean session 0) is removed after this many seconds offline; applies to sessions stored before a change too.",
  },
  {
    key: "session.max_expiry_s",
    type: int(0, MAX_I32),
    default: 86_400,
    doc:
      "MQTT 5: a client's Session Expiry Interval is capped to this (s), also for sessions stored before a change; 0 keeps every MQTT 5 session clean.",
  },
  {
    key: "session.store_stream",
    type: str,
    default: "mqtt_gateway",
    doc:
      "Stream of the log topic that holds stored sessions' subscriptions (created when missing).",
  },
  {
    key: "session.store_topic",
    type: str,
    default: "sessions",
    doc: "Log topic that holds stored sessions' subscriptions, one record per change.",
  },

  {
    key: "session.claim_poll_interval_ms",
    type: int(20, 60_000),
    default: 250,
    doc:
      "Iggy mode: how often the session topic is read for other gateways' claims (ms). A CONNECT through another gateway closes the connection held here within about this long.",
  },
  {
    key: "session.takeover_wait_ms",
    type: int(0, 60_000),
    default: 3_000,
    doc:
      "Iggy mode: a stored session connected through another gateway is resumed once that gateway has stored its positions, or after this long without its answer (ms; the gateway may be gone).",
  },

  // [retained]
  {
    key: "retained.stream",
    type: str,
    default: "mqtt_gateway",
    doc:
      "Stream of the log topic that holds retained messages, one record per set or clear (created when missing).",
  },
  {
    key: "retained.topic",
    type: str,
    default: "retained",
    doc:
      "Log topic that holds retained messages; every gateway sharing an Iggy reads the same one.",
  },
  {
    key: "retained.poll_interval_ms",
    type: int(10, 3_600_000),
    default: 500,
    doc:
      "Iggy mode: how often the retained topic is read for other gateways' sets and clears (ms).",
  },

  // [auth]
  {
    key: "auth.allow_anonymous",
    type: bool,
    default: false,
    doc: "Accept CONNECT without username.",
  },
  {
    key: "auth.anonymous_sources",
    type: list,
    default: ["127.0.0.1", "::1"],
    doc: 'Source addresses anonymous clients may connect from (exact IPs; "*" = any).',
  },
  {
    key: "auth.anonymous_permissions",
    type: oneOf("send_poll", "send", "poll"),
    default: "send_poll",
    doc:
      "Rights of anonymous clients, on every stream and topic. An [anonymous.permissions] table (a [[users]] entry's form) replaces it with rights per stream and topic.",
  },
  {
    key: "auth.pat_username",
    type: str,
    default: "__pat__",
    doc: "Iggy mode: a CONNECT with this username carries a personal access token as password.",
  },
  {
    key: "auth.failure_backoff_ms",
    type: int(0, 60_000),
    default: 250,
    doc:
      "After auth.failure_free_attempts failed logins from one source, CONNACK is delayed by this, doubling per failure (ms); 0 = off. Every 30 s without a failure halves the source's count.",
  },
  {
    key: "auth.failure_backoff_max_ms",
    type: int(0, 600_000),
    default: 8_000,
    doc: "Upper bound of the failed-login delay (ms).",
  },
  {
    key: "auth.failure_free_attempts",
    type: int(0, 1000),
    default: 3,
    doc: "Failed logins from one source before delays start.",
  },
  {
    key: "auth.client_id_pattern",
    type: optStr,
    default: "",
    doc:
      'A regular expression every client id of a named principal must match ({username} stands for its name, escaped), e.g. "^{username}-"; a [[users]] entry\'s own client_id_pattern replaces it. Empty = any id. Anonymous clients are not matched.',
  },
  {
    key: "auth.cache_ttl_ms",
    type: int(0, 3_600_000),
    default: 30_000,
    doc: "Iggy mode: how long a verified login and its permissions are reused (ms).",
  },
  {
    key: "auth.jwt_jwks_file",
    type: optStr,
    default: "",
    doc:
      'Login tokens: a JSON Web Key Set file ({"keys": [...]}) of public keys that may sign them (RSA → RS256, EC P-256 → ES256, OKP Ed25519 → EdDSA). A CONNECT password starting "eyJ" is then a token. Reloaded on SIGHUP. Empty = none.',
  },
  {
    key: "auth.jwt_hmac_secret",
    type: optStr,
    default: "",
    doc:
      "Login tokens signed with HS256 by this shared secret (at least 32 bytes; environment only). Empty = none.",
    secret: true,
  },
  {
    key: "auth.jwt_issuer",
    type: optStr,
    default: "",
    doc: "A token's iss must be this. Empty = not checked.",
  },
  {
    key: "auth.jwt_audience",
    type: optStr,
    default: "",
    doc: "A token's aud must be or hold this. Empty = not checked.",
  },
  {
    key: "auth.jwt_leeway_s",
    type: int(0, 600),
    default: 30,
    doc:
      "Clock skew allowed on a token's exp and nbf (s); a connection is closed at exp plus this.",
  },
  {
    key: "auth.jwt_principal_claim",
    type: str,
    default: "sub",
    doc:
      "The claim naming a token's principal (its user name: client-id ownership, client_id_pattern, logs).",
  },
  {
    key: "auth.jwt_permissions_claim",
    type: str,
    default: "mqtt_permissions",
    doc:
      "The claim holding a token's rights in a [[users]] entry's permissions form ({global, streams}); it wins over a template.",
  },
  {
    key: "auth.jwt_template_claim",
    type: str,
    default: "mqtt_template",
    doc:
      "The claim naming a [jwt_templates.<name>] permission template for a token without a permissions claim.",
  },
  {
    key: "auth.jwt_default_template",
    type: optStr,
    default: "",
    doc:
      "The [jwt_templates.<name>] template of tokens with neither claim. Empty = such a token is refused.",
  },
  {
    key: "auth.jwt_max_bytes",
    type: int(64, 65_535),
    default: 4096,
    doc: "Longest token accepted (bytes); a longer one is refused before it is parsed.",
  },

  // [mapping]
  {
    key: "mapping.map_file",
    type: str,
    default: "config/topic-map.toml",
    doc: "Topic map: TOML rules, or a Strimzi topic-mapping-rules.json.",
  },

  // [log]
  {
    key: "log.auto_create",
    type: bool,
    default: false,
    doc: "Create a missing stream/topic on first publish (else the publish is denied).",
  },
  {
    key: "log.auto_create_partitions",
    type: int(1, 1000),
    default: 3,
    doc: "Partitions of an auto-created topic.",
  },
  {
    key: "log.auto_create_durability",
    type: oneOf("fsync", "server_default"),
    default: "fsync",
    doc:
      "Iggy mode: topics the gateway creates acknowledge sends only once on disk (fsync), or use the server's defaults (acknowledged before the disk).",
  },
  {
    key: "log.retention_max_age_s",
    type: int(0, MAX_I32),
    default: 604_800,
    doc:
      "Messages older than this are deleted (s); 0 keeps them forever. Age is time that passed: a step of the wall clock or a stop of the gateway does not count (embedded and forward modes; Iggy ages by its own clock).",
  },
  {
    key: "log.retention_max_topic_bytes",
    type: int(0, MAX_SAFE),
    default: 1_073_741_824,
    doc: "Oldest messages of a topic are deleted beyond this size (bytes); 0 = unbounded.",
  },
  {
    key: "log.retention_interval_ms",
    type: int(100, 86_400_000),
    default: 30_000,
    doc: "How often retention runs (ms).",
  },

  // [embedded]
  {
    key: "embedded.path",
    type: str,
    default: "data/gateway.db",
    doc:
      "SQLite catalog file of the embedded log (created if missing); messages go to segment files in the directory <path>-log beside it.",
  },
  {
    key: "embedded.qos0_sync_ms",
    type: int(0, 1000),
    default: 100,
    doc:
      "A commit of QoS 0 messages only is readable at once and synced by the next commit someone waits for (QoS 1/2, wills, positions) or within this many ms; a power loss or OS crash loses at most these QoS 0 messages, never a PUBACKed one. Each sync costs CPU and flash wear: 5 ms is 200 syncs a second under a steady QoS 0 stream. 0 = sync every commit.",
  },
  {
    key: "embedded.commit_linger_ms",
    type: int(0, 100),
    default: 0,
    doc:
      "A transaction someone waits for (QoS 1/2 PUBACK, wills, positions) that holds fewer than 64 messages waits up to this many ms for others to share its fsync; the write is not delayed (live subscribers get the messages at once), only the PUBACK, by at most this. For fleets of devices that each send a reading now and then: fewer fsyncs (CPU, flash wear) for a longer PUBACK. A closed loop with few messages in flight (a client waiting for each PUBACK) slows down by as much. 0 = fsync each at once.",
  },
  {
    key: "embedded.writer_thread",
    type: oneOf("in-process", "worker"),
    default: "in-process",
    doc:
      "Where the catalog's SQLite statements (consumer offsets, topic creation) run: in-process (no thread hop) or worker (off the event loop). Messages go to the segment files either way.",
  },
  {
    key: "embedded.max_store_bytes",
    type: int(1_048_576, MAX_SAFE),
    default: 8_589_934_592,
    doc:
      "Largest size of the message log's segment files together (bytes); when full, appends fail (no PUBACK) until retention frees room, and /ready is 503 while the log has no room under it for one message of limits.max_packet_bytes (or for one segment, an eighth of this, when that is less), and after it refused an append until retention frees room. The disk bounds it too: a segment is made only where it fits above a 4 MiB reserve of free space (smaller than usual when that is what fits); below it appends fail at once, writing nothing, /ready names the disk, and they resume within a second of space being freed. A burst bigger than a segment's room goes as several commits; only what finds no room under the bound is refused. At least limits.max_packet_bytes rounded up to 4 KiB plus 4 KiB, or the gateway refuses to start naming both (a message that could never fit); keep it well above.",
  },

  // [iggy]
  {
    key: "iggy.address",
    type: addrs,
    default: "127.0.0.1:8090",
    doc:
      "Iggy server TCP address, host:port; several, comma-separated, for the nodes of one Iggy cluster (protocol 0.12: partition requests go to each partition's primary).",
  },
  {
    key: "iggy.protocol",
    type: oneOf("auto", "0.11", "0.12"),
    default: "auto",
    doc:
      "Iggy binary protocol: 0.11 (Iggy 0.9), 0.12 (Iggy 0.10), or auto (try 0.12, then what the server's IncompatibleProtocol answer names).",
  },
  {
    key: "iggy.username",
    type: str,
    default: "iggy",
    doc: "Service user the gateway appends and polls as.",
  },
  {
    key: "iggy.password",
    type: optStr,
    default: "",
    doc: "Service user's password (environment only).",
    secret: true,
  },
  {
    key: "iggy.token",
    type: optStr,
    default: "",
    doc: "Service personal access token, instead of the password (environment only).",
    secret: true,
  },
  { key: "iggy.tls", type: bool, default: false, doc: "Connect to Iggy over TLS." },
  {
    key: "iggy.tls_ca_file",
    type: optStr,
    default: "",
    doc: "PEM CA file to verify Iggy's certificate (empty = system roots).",
  },
  {
    key: "iggy.tls_server_name",
    type: optStr,
    default: "",
    doc: "TLS server name (empty = host of iggy.address).",
  },
  {
    key: "iggy.request_timeout_ms",
    type: int(100, 600_000),
    default: 5_000,
    doc: "A request without reply within this time fails (ms).",
  },
  {
    key: "iggy.pool_size",
    type: int(1, 64),
    default: 2,
    doc:
      "Service connections per Iggy node (protocol 0.11: one request in flight each; 0.12: up to 256 each).",
  },
  {
    key: "iggy.heartbeat_interval_ms",
    type: int(100, 600_000),
    default: 5_000,
    doc: "Ping interval on idle connections (ms).",
  },
  {
    key: "iggy.reconnect_max_ms",
    type: int(100, 600_000),
    default: 10_000,
    doc: "Upper bound of the reconnect back-off (ms).",
  },
  {
    key: "iggy.batch_max_messages",
    type: int(1, 100_000),
    default: 1_000,
    doc: "At most this many messages per send.",
  },
  {
    key: "iggy.batch_max_bytes",
    type: int(1024, 64 * 1024 * 1024),
    default: 1_048_576,
    doc: "At most this many payload bytes per send.",
  },
  {
    key: "iggy.batch_linger_ms",
    type: int(0, 1000),
    default: 0,
    doc:
      "How long a new batch waits for more messages (ms); 0 = only those of the same tick. (After a send, a topic's unkeyed messages may also wait, at most about one send's time, for the devices' next ones when that measures faster: log/iggy/round_gauge.ts.)",
  },
  {
    key: "iggy.metadata_refresh_ms",
    type: int(1000, 86_400_000),
    default: 60_000,
    doc: "Cached partition counts are refreshed this often (ms).",
  },

  // [forward]
  {
    key: "forward.enabled",
    type: bool,
    default: false,
    doc:
      "Edge box with an uplink (gateway.backend = embedded): devices are served from the local log and every appended message is also forwarded to the Iggy of [iggy], in order, once.",
  },
  {
    key: "forward.batch_max_messages",
    type: int(1, 100_000),
    default: 5_000,
    doc: "At most this many messages per forwarded send.",
  },
  {
    key: "forward.batch_max_bytes",
    type: int(1024, 64 * 1024 * 1024),
    default: 4_194_304,
    doc: "At most this many payload bytes per forwarded send.",
  },
  {
    key: "forward.linger_ms",
    type: int(1, 10_000),
    default: 20,
    doc:
      "How long a forwarded partition with fewer messages ready than a full send waits for more before it sends them (ms; a partition with none waits until the local log says it grew): a longer wait sends fewer, larger batches, each message up to this much later.",
  },
  {
    key: "forward.when_full",
    type: oneOf("refuse", "drop_oldest"),
    default: "refuse",
    doc:
      "When unforwarded messages fill embedded.max_store_bytes: refuse (appends fail, no PUBACK, nothing acknowledged is lost) or drop_oldest (the oldest unforwarded messages go, counted and logged).",
  },

  // [limits]
  {
    key: "limits.max_packet_bytes",
    type: int(64, 268_435_455),
    default: 1_048_576,
    doc:
      "Largest MQTT packet accepted (remaining length, bytes; MQTT 5: the CONNACK's Maximum Packet Size); larger → connection closed before the body is read.",
  },
  {
    key: "limits.max_connect_packet_bytes",
    type: int(64, 268_435_455),
    default: 65_536,
    doc:
      "Largest first packet (CONNECT, bytes; at most limits.max_packet_bytes applies): before it is read no one has logged in, so it bounds what an unauthenticated connection holds of limits.max_partial_packet_bytes_total; larger → connection closed before the body is read. Raise it for clients whose CONNECT carries a large will payload.",
  },
  {
    key: "limits.max_partial_packet_bytes_total",
    type: int(1024, MAX_SAFE),
    default: 67_108_864,
    doc:
      "Bytes held for packets not yet fully received, all connections together (at least limits.max_packet_bytes + 4); a read that would pass it → that connection closed (MQTT 5: DISCONNECT 0x89).",
  },
  {
    key: "limits.max_connections",
    type: int(1, 1_000_000),
    default: 10_000,
    doc: "Concurrent MQTT connections; beyond → new sockets closed at once.",
  },
  {
    key: "limits.max_connection_rate_per_source",
    type: int(0, 1_000_000),
    default: 200,
    doc:
      "New connections per second from one source address (burst twice that); beyond → closed at once. 0 = unlimited.",
  },
  {
    key: "limits.connect_timeout_ms",
    type: int(100, 600_000),
    default: 10_000,
    doc: "A socket that sends no complete CONNECT within this time is closed (ms).",
  },
  {
    key: "limits.max_keep_alive_s",
    type: int(0, 65_535),
    default: 3_600,
    doc: "Keep-alive larger than this (or 0 = none) is clamped to it (s); 0 here allows none.",
  },
  {
    key: "limits.max_topic_bytes",
    type: int(1, 65_535),
    default: 255,
    doc: "Longest topic (bytes); longer → rejected. At most 255 with the iggy backend.",
  },
  {
    key: "limits.max_topic_levels",
    type: int(1, 65_535),
    default: 32,
    doc: "Most '/'-separated levels in a topic; more → rejected.",
  },
  {
    key: "limits.max_user_properties",
    type: int(0, 1_000),
    default: 32,
    doc:
      "MQTT 5 user properties one packet may carry; more → DISCONNECT 0x95. Each must also fit an Iggy header (255 bytes).",
  },
  {
    key: "limits.max_topic_aliases",
    type: int(0, 65_535),
    default: 16,
    doc: "MQTT 5 inbound topic aliases per connection (CONNACK Topic Alias Maximum); 0 = none.",
  },
  {
    key: "limits.max_topic_aliases_out",
    type: int(0, 65_535),
    default: 16,
    doc:
      "MQTT 5 topic aliases the gateway uses toward one client (at most the client's Topic Alias Maximum; the least recently used is rebound when all are taken); 0 = always the full topic.",
  },
  {
    key: "limits.max_subscriptions_per_client",
    type: int(1, 100_000),
    default: 100,
    doc: "Subscriptions one client may hold; beyond → SUBACK 0x80 for the excess.",
  },
  {
    key: "limits.max_triples_per_subscription",
    type: int(1, 100_000),
    default: 64,
    doc: "Partitions (triples) one filter may resolve to; beyond → SUBACK 0x80 for that filter.",
  },
  {
    key: "limits.max_stored_sessions",
    type: int(0, 10_000_000),
    default: 100_000,
    doc:
      "Stored sessions (clean session 0 / MQTT 5 expiry > 0) kept; a new one beyond evicts the one offline the longest (logged, session_stored_evicted_total), or → CONNACK 3 (server unavailable) when all are connected. About 1–2 KB of memory each offline.",
  },
  {
    key: "limits.max_retained_messages",
    type: int(0, 10_000_000),
    default: 100_000,
    doc:
      "Topics with a retained message; a retained PUBLISH to a new topic beyond → not retained (MQTT 5 QoS 1/2: PUBACK 0x97).",
  },
  {
    key: "limits.max_retained_bytes",
    type: int(0, MAX_SAFE),
    default: 67_108_864,
    doc:
      "Bytes of all retained messages together (topic + headers + payload; memory and the retained topic); beyond → not retained.",
  },
  {
    key: "limits.max_retained_message_bytes",
    type: int(0, MAX_I32),
    default: 2_097_152,
    doc:
      "Bytes of one retained message (topic + headers + payload); larger → not retained. Keep it above limits.max_packet_bytes plus headers, or the largest packets cannot be retained.",
  },
  {
    key: "limits.max_share_groups",
    type: int(0, 1_000_000),
    default: 10_000,
    doc:
      "Shared subscription groups ($share/<group>/<filter>), connected or waiting for a member; a new one beyond → SUBACK 0x97 (3.1.1: 0x80).",
  },
  {
    key: "limits.max_share_members",
    type: int(1, 1_000_000),
    default: 1_000,
    doc: "Members of one shared subscription group; one more → SUBACK 0x97 (3.1.1: 0x80).",
  },
  {
    key: "limits.max_replay_messages",
    type: int(0, MAX_I32),
    default: 10_000,
    doc:
      "Messages a $replay/<from>/ subscription replays from the log; beyond → the rest is skipped, then live.",
  },
  {
    key: "limits.max_inflight_per_client",
    type: int(1, 65_535),
    default: 32,
    doc: "QoS 1 deliveries awaiting PUBACK per client; beyond → the client's queue waits.",
  },
  {
    key: "limits.max_inflight_publishes_per_client",
    type: int(1, 65_535),
    default: 64,
    doc:
      "Inbound QoS 1 publishes awaiting append per client; beyond → the socket is not read. MQTT 5: the CONNACK's Receive Maximum; one more QoS 1/2 PUBLISH unanswered → DISCONNECT 0x93.",
  },
  {
    key: "limits.max_pending_appends",
    type: int(1, 10_000_000),
    default: 100_000,
    doc: "Messages waiting for the backend, all clients; beyond → sockets are not read.",
  },
  {
    key: "limits.max_outbound_queue_bytes_per_client",
    type: int(1024, MAX_SAFE),
    default: 8_388_608,
    doc:
      "Queued outbound bytes per client; live QoS 0 beyond → dropped, live QoS 1 → client paused; at twice it the partition's reader waits (the log holds the rest of a burst) while the client drains, and a client that makes no progress (no write, no PUBACK) for 1 s there (limits.slow_consumer_timeout_ms when shorter) is evicted; catch-ups, replays and retained sets wait for it to drain. Keep it several times limits.max_packet_bytes: a QoS 1 subscriber at twice it holds back the others on its partitions while it drains.",
  },
  {
    key: "limits.max_outbound_queue_bytes",
    type: int(1024, MAX_SAFE),
    default: 268_435_456,
    doc:
      "Queued outbound bytes, all clients together; beyond → as the per-client cap. At least limits.max_outbound_queue_bytes_per_client and limits.max_packet_bytes.",
  },
  {
    key: "limits.slow_consumer_timeout_ms",
    type: int(10, 3_600_000),
    default: 10_000,
    doc:
      "A paused client, or one a catch-up, replay or retained set waits for, that does not drain within this time is evicted (ms).",
  },
  {
    key: "limits.resend_after_ms",
    type: int(0, 3_600_000),
    default: 30_000,
    doc:
      "A QoS 1 delivery not PUBACKed within this time is resent on the same connection with DUP set (ms); 0 = never.",
  },
  {
    key: "limits.poll_batch_size",
    type: int(1, 100_000),
    default: 512,
    doc:
      "Messages a shared reader polls at once; a catch-up polls at most this many, and only what its client's queue has room for in bytes.",
  },
  {
    key: "limits.commit_interval_ms",
    type: int(1, 600_000),
    default: 200,
    doc: "Settled offsets are stored at least this often (ms).",
  },
  {
    key: "limits.commit_batch_count",
    type: int(1, 1_000_000),
    default: 1_000,
    doc: "…or as soon as this many messages have been settled since the last store.",
  },
  {
    key: "limits.max_append_batch",
    type: int(1, 100_000),
    default: 1_000,
    doc: "Messages grouped into one backend commit at most.",
  },
] as const satisfies readonly KeySpec[];

/** The specs by dotted key. */
export const KEY_SPEC_BY_KEY: ReadonlyMap<string, KeySpec> = new Map(
  KEY_SPECS.map((s): [string, KeySpec] => [s.key, s]),
);

/** The environment variable that overrides a key. */
export function envNameOf(key: string): string {
  return "IGGY_MQTT_" + key.toUpperCase().replaceAll(".", "_");
}
