/**
 * The backend contract run against the fake Iggy (`tests/helpers/fake_iggy/`) in both dialects,
 * with `iggy.protocol = "auto"`: the 0.12 client's login, topics, sends, polls and offsets end to
 * end. A fake proves our reading of the protocol is consistent, not that a server agrees: for
 * 0.12 the bytes are checked against the official codec (`src/log/iggy/v12/vectors_test.ts`),
 * for 0.11 against a real Iggy 0.9 server (`iggy_test.ts`).
 *
 * @module
 */
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import { fakeIggyConfig, FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { runBackendContract } from "./backend_contract.ts";

for (const dialect of ["0.11", "0.12"] as const) {
  runBackendContract(`iggy fake ${dialect}`, () => {
    const node = new FakeNode({ dialect, store: new FakeStore() });
    const backend = new IggyBackend(fakeIggyConfig(), { patUsername: "", cacheTtlMs: 0 }, {
      dial: node.dial,
    });
    return Promise.resolve({ backend, cleanup: () => node.close() });
  }, { credentials: { username: "iggy", password: "iggy" } });
}
