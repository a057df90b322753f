// §19.2 acceptance 6: every operation of the served document has a stable
// operation id (`<tag>.<verb><Resource>`, lowerCamel, unique, its tag's), and
// the committed document, types and table are exactly what the generator
// makes of the served document (a change to the API without regenerating
// the SDK fails here).

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import { OPERATIONS } from "../src/index.js";
import { PACKAGE_ROOT, startCheckfu, type Server } from "./harness.js";

interface Generator {
  generatedFiles(doc: unknown): Promise<Record<string, string>>;
}

type Doc = {
  tags: { name: string; "x-resource"?: string }[];
  paths: Record<string, Record<string, { operationId?: string; tags?: string[] }>>;
};

let server: Server;
let doc: Doc;
before(async () => {
  server = await startCheckfu();
  const r = await fetch(`${server.baseUrl}/v1/openapi.json`);
  assert.equal(r.status, 200);
  doc = (await r.json()) as Doc;
});
after(async () => {
  await server?.stop();
});

const PATTERN = /^([a-z][a-zA-Z]*)\.([a-z]+[A-Z][a-zA-Z]*)$/;

test("every operation has a stable, unique operation id of the form <tag>.<verb><Resource>", () => {
  const declared = new Map(doc.tags.map((t) => [t.name, t["x-resource"]]));
  const seen = new Map<string, string>();
  let count = 0;
  for (const [route, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      count++;
      const where = `${method.toUpperCase()} ${route}`;
      const id = op.operationId;
      assert.ok(id, `${where} has no operationId`);
      const m = PATTERN.exec(id);
      assert.ok(m, `${where}: ${id} is not <tag>.<verb><Resource> in lowerCamel`);
      assert.deepEqual(op.tags, [m[1]], `${where}: ${id} belongs to exactly its tag`);
      assert.ok(declared.get(m[1]!), `${where}: the tag ${m[1]} is declared, with its resource`);
      assert.equal(seen.get(id), undefined, `${id} is used by ${seen.get(id)} and ${where}`);
      seen.set(id, where);
    }
  }
  assert.ok(count > 150, `${count} operations`);
  for (const id of ["automationGraphs.createAutomationGraph", "sessions.createSession", "sessions.listSessionEvents", "approvals.answerActionApproval"]) {
    assert.ok(seen.has(id), `${id} exists`);
  }
  assert.deepEqual(Object.keys(OPERATIONS).sort(), [...seen.keys()].sort(), "the SDK's table has every served operation");
});

test("the committed SDK is what the generator makes of the served document", async () => {
  const url = pathToFileURL(path.join(PACKAGE_ROOT, "scripts/generate.mjs")).href;
  const generator = (await import(url)) as Generator;
  const files = await generator.generatedFiles(doc);
  for (const [file, text] of Object.entries(files)) {
    const committed = await readFile(path.join(PACKAGE_ROOT, file), "utf8");
    assert.ok(
      committed === text,
      `sdk/typescript/${file} differs from what the served document generates: run \`npm run generate -- --from <a running checkfu>\` in sdk/typescript and commit the result`,
    );
  }
});
