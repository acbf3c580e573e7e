/**
 * The JavaScript peer for the benchmark: aedes 1.2.0 (default in-memory persistence) on a
 * loopback port, Nagle off on accepted sockets (as a tuned deployment would). `run.ts` runs it
 * under Node (copied next to an `npm install aedes@1.2.0`), or under Deno when Node is absent:
 *
 *   node <cache>/aedes_server.mjs --port=18831
 *   deno run -A tests/bench/aedes_server.mjs --port=18831
 *
 * @module
 */
import { Aedes } from "aedes";
import { createServer } from "node:net";
import process from "node:process";

const port = Number(process.argv.find((a) => a.startsWith("--port="))?.slice(7));
const broker = await Aedes.createBroker();
broker.on("clientError", (c, e) => console.error(`aedes client ${c.id}: ${e.message}`));
const server = createServer({ noDelay: true }, broker.handle);
server.listen(port, "127.0.0.1");
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    server.close();
    broker.close(() => process.exit(0));
  });
}
