/**
 * One phrase naming the Iggy server and the wire dialect in use, for the start-up log line,
 * `/ready` and the status page: "Iggy server 0.10.0, binary protocol 0.12.2 (iggy.protocol auto)".
 *
 * @module
 */

import type { DialectChooser } from "./dialect.ts";
import type { RegisterReply } from "./login.ts";
import { formatVersion } from "./version.ts";

/** The phrase, or undefined before the first Register. */
export function describeServer(
  r: RegisterReply | undefined,
  chooser: DialectChooser,
): string | undefined {
  const d = chooser.current;
  if (!r || !d) return undefined;
  const server = r.serverVersion === "" ? "" : ` ${r.serverVersion}`;
  return `Iggy server${server}, binary protocol ${formatVersion(d.protocolVersion)} ` +
    `(dialect ${d.name}, iggy.protocol ${chooser.setting})`;
}
