/**
 * The typed, frozen configuration the gateway runs with. Defaults live in `schema.ts` only.
 *
 * @module
 */
import type { Permissions } from "../access/permissions.ts";

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

/** The whole configuration. Field names are the config keys. */
export interface GatewayConfig {
  readonly gateway: {
    readonly id: string;
    readonly backend: "embedded" | "iggy";
    readonly log_level: "debug" | "info" | "warn" | "error";
    readonly drain_timeout_ms: number;
  };
  readonly listeners: {
    readonly tcp: string;
    /** What drives the TCP listener's sockets. */
    readonly tcp_socket_layer: "auto" | "epoll" | "node";
    readonly tls: string;
    readonly tls_cert_file: string;
    readonly tls_key_file: string;
    readonly tls_client_auth: "none" | "optional" | "require";
    readonly tls_client_ca_file: string;
    readonly tls_identity: "cn" | "san_dns" | "san_uri" | "san_email";
    readonly tls_crl_file: string;
    readonly http: string;
    /** "3.1.1" and/or "5". */
    readonly mqtt_versions: readonly string[];
  };
  readonly mqtt5: {
    readonly puback_coordinates: boolean;
    readonly max_will_delay_s: number;
  };
  readonly session: {
    readonly will: "publish" | "refuse";
    readonly expiry_s: number;
    readonly max_expiry_s: number;
    readonly store_stream: string;
    readonly store_topic: string;
  };
  readonly auth: {
    readonly allow_anonymous: boolean;
    readonly anonymous_sources: readonly string[];
    readonly anonymous_permissions: "send_poll" | "send" | "poll";
    readonly pat_username: string;
    readonly failure_backoff_ms: number;
    readonly failure_backoff_max_ms: number;
    readonly failure_free_attempts: number;
    readonly cache_ttl_ms: number;
    readonly client_id_pattern: string;
  };
  readonly mapping: { readonly map_file: string };
  readonly log: {
    readonly auto_create: boolean;
    readonly auto_create_partitions: number;
    readonly auto_create_durability: "fsync" | "server_default";
    readonly retention_max_age_s: number;
    readonly retention_max_topic_bytes: number;
    readonly retention_interval_ms: number;
  };
  readonly embedded: {
    readonly path: string;
    readonly writer_thread: "in-process" | "worker";
    readonly max_store_bytes: number;
  };
  readonly iggy: {
    readonly address: string;
    readonly protocol: "auto" | "0.11" | "0.12";
    readonly username: string;
    readonly password: string;
    readonly token: string;
    readonly tls: boolean;
    readonly tls_ca_file: string;
    readonly tls_server_name: string;
    readonly request_timeout_ms: number;
    readonly pool_size: number;
    readonly heartbeat_interval_ms: number;
    readonly reconnect_max_ms: number;
    readonly batch_max_messages: number;
    readonly batch_max_bytes: number;
    readonly batch_linger_ms: number;
    readonly metadata_refresh_ms: number;
  };
  readonly limits: {
    readonly max_packet_bytes: number;
    readonly max_connections: number;
    readonly max_connection_rate_per_source: number;
    readonly connect_timeout_ms: number;
    readonly max_keep_alive_s: number;
    readonly max_topic_bytes: number;
    readonly max_topic_levels: number;
    readonly max_user_properties: number;
    readonly max_topic_aliases: number;
    readonly max_subscriptions_per_client: number;
    readonly max_triples_per_subscription: number;
    readonly max_stored_sessions: number;
    readonly max_replay_messages: number;
    readonly max_inflight_per_client: number;
    readonly max_inflight_publishes_per_client: number;
    readonly max_pending_appends: number;
    readonly max_outbound_queue_bytes_per_client: number;
    readonly max_outbound_queue_bytes: number;
    readonly slow_consumer_timeout_ms: number;
    readonly resend_after_ms: number;
    readonly poll_batch_size: number;
    readonly commit_interval_ms: number;
    readonly commit_batch_count: number;
    readonly max_append_batch: number;
  };
  readonly users: readonly UserConfig[];
}
