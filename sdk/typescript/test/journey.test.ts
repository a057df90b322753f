// §19.2 acceptance 1: the README journey, with the SDK alone, type-checks
// under `tsc --strict` (this file and examples/journey.ts are compiled with
// the package's strict settings before any test runs) and passes against a
// live server. The README shows the example verbatim.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { journey } from "../examples/journey.js";
import { PACKAGE_ROOT, startCheckfu, type Server } from "./harness.js";

let server: Server;
before(async () => {
  server = await startCheckfu();
});
after(async () => {
  await server?.stop();
});

test("the README journey runs with the SDK alone", async () => {
  const events = await journey(server.admin);
  const types = events.map((e) => e.type);
  assert.equal(types[0], "session.created");
  assert.ok(types.includes("user.message"), types.join(","));
  const reply = events.find((e) => e.type === "agent.message");
  assert.deepEqual(reply?.payload["content"], [{ type: "text", text: "echo: hello" }]);
  assert.equal(types.at(-1), "session.status_idle");
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    "every seq from 1, once, in order",
  );
  // What the stream yielded is the log.
  const sessionId = events[0]!.session_id;
  const logged = await server.admin.sessions.listEvents(sessionId, { limit: 1000 }).all();
  assert.deepEqual(
    logged.slice(0, events.length).map((e) => e.id),
    events.map((e) => e.id),
  );
});

test("the README shows the journey exactly as it is tested", async () => {
  const readme = await readFile(path.join(PACKAGE_ROOT, "README.md"), "utf8");
  const example = await readFile(path.join(PACKAGE_ROOT, "examples/journey.ts"), "utf8");
  assert.ok(readme.includes(example.trim()), "README.md embeds examples/journey.ts verbatim");
});
