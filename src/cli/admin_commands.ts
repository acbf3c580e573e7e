/**
 * The admin commands' output: each asks the running gateway (`admin_client.ts`) and prints its
 * answer as a table, or with `--json` the answer's rows one JSON object a line.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { OperatorError } from "../config/errors.ts";
import { adminCall, type AdminTarget, adminTarget } from "./admin_client.ts";

/** The names of the admin commands (their options are in commands.ts). */
export const ADMIN_COMMANDS = [
  "clients",
  "disconnect",
  "sessions",
  "drop-session",
  "topics",
  "log-level",
] as const;

/** What an admin command was given. */
export interface AdminArgs {
  readonly url: string | undefined;
  readonly json: boolean;
  readonly positionals: readonly string[];
  readonly discardSession: boolean;
}

type Row = Record<string, unknown>;

/** Runs admin command `name`, printing through `print`. */
export async function runAdminCommand(
  name: (typeof ADMIN_COMMANDS)[number],
  config: GatewayConfig,
  a: AdminArgs,
  print: (line: string) => void,
): Promise<void> {
  const t = adminTarget(config, a.url);
  const rows = (body: Row, field: string) => {
    const list = body[field] as Row[];
    if (a.json) return list.forEach((r) => print(JSON.stringify(r)));
    const what = field === "partitions"
      ? `${list.length} partitions of ${body.listed} of ${body.total} topics`
      : `${body.listed} of ${body.total} ${field}`;
    return printTable(list, COLUMNS[field], print, what);
  };
  switch (name) {
    case "clients":
      return rows(await adminCall(t, "GET", "clients"), "clients");
    case "sessions":
      return rows(await adminCall(t, "GET", "sessions"), "sessions");
    case "topics": {
      const body = await adminCall(t, "GET", "topics");
      if (a.json) return rows(body, "topics");
      // One line per partition: what each holds is the point of the listing.
      const parts = (body.topics as Row[]).flatMap((x) =>
        (x.partitions as Row[]).map((p) => ({ stream: x.stream, topic: x.topic, ...p }))
      );
      return rows({ ...body, partitions: parts }, "partitions");
    }
    case "disconnect":
    case "drop-session":
      for (const id of a.positionals) print(await writeAction(t, name, id, a));
      return;
    case "log-level": {
      const level = a.positionals[0];
      if (a.positionals.length > 1) {
        throw new OperatorError(
          "out_of_range",
          "log-level: give at most one LEVEL (debug, info, warn or error)",
        );
      }
      const r = level === undefined
        ? await adminCall(t, "GET", "log-level")
        : await adminCall(t, "POST", "log-level", { level });
      const said = r.previous === undefined
        ? `log level ${r.level}`
        : `log level ${r.level} (was ${r.previous})`;
      return print(a.json ? JSON.stringify(r) : said);
    }
  }
}

/** Disconnects client `id` or drops its stored session; what to print about it. */
async function writeAction(
  t: AdminTarget,
  name: "disconnect" | "drop-session",
  id: string,
  a: AdminArgs,
): Promise<string> {
  if (name === "drop-session") {
    const r = await adminCall(t, "POST", "sessions/drop", { client_id: id });
    return a.json ? JSON.stringify(r) : `dropped the stored session of "${id}"`;
  }
  const q = { client_id: id, discard_session: String(a.discardSession) };
  const r = await adminCall(t, "POST", "clients/disconnect", q);
  if (a.json) return JSON.stringify(r);
  const dropped = r.session_dropped ? "; its stored session dropped" : "";
  return `disconnected "${id}" (MQTT ${r.protocol})${dropped}`;
}

/** Columns of each listing: heading and how a row shows it. */
const COLUMNS: Record<string, [string, (r: Row) => string][]> = {
  clients: [
    ["CLIENT ID", (r) => String(r.client_id)],
    ["USER", (r) => String(r.user) || "(anonymous)"],
    ["ADDRESS", (r) => String(r.address)],
    ["LISTENER", (r) => String(r.listener)],
    ["MQTT", (r) => String(r.protocol)],
    ["SINCE", (r) => isoOf(r.since_ms as number)],
    ["IN", (r) => String(r.messages_in)],
    ["OUT", (r) => String(r.messages_out)],
    ["QUEUED B", (r) => String(r.queued_bytes)],
    ["STORED", (r) => (r.stored_session ? "yes" : "no")],
  ],
  sessions: [
    ["CLIENT ID", (r) => String(r.client_id)],
    ["OWNER", (r) => r.owner === null ? "?" : String(r.owner) || "(anonymous)"],
    ["MQTT", (r) => String(r.protocol)],
    ["STATE", (r) => (r.connected ? "connected" : "offline")],
    ["EXPIRES", (r) => r.expires_at_ms === null ? "-" : isoOf(r.expires_at_ms as number)],
    ["SUBSCRIPTIONS", (r) => (r.subscriptions as string[]).join(" ")],
  ],
  partitions: [
    ["STREAM", (r) => String(r.stream)],
    ["TOPIC", (r) => String(r.topic)],
    ["PARTITION", (r) => String(r.partition)],
    ["MESSAGES", (r) => String(r.messages)],
    ["BYTES", (r) => (r.bytes === null ? "?" : String(r.bytes))],
    [
      "OFFSETS",
      (r) => r.messages === 0 ? "-" : `${r.first_offset ?? "?"}..${(r.next_offset as number) - 1}`,
    ],
  ],
};

function isoOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19) + "Z";
}

function printTable(
  rows: readonly Row[],
  columns: [string, (r: Row) => string][],
  print: (line: string) => void,
  footer: string,
): void {
  const cells = [columns.map(([h]) => h), ...rows.map((r) => columns.map(([, f]) => f(r)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((c) => c[i].length)));
  for (const c of cells) print(c.map((v, i) => v.padEnd(widths[i])).join("  ").trimEnd());
  print(`(${footer})`);
}
