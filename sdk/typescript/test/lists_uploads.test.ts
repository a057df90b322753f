// Pagination follows next_page to the end; uploads stream with progress and
// read back byte for byte.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { UploadProgress } from "../src/index.js";
import { startCheckfu, type Server } from "./harness.js";

let server: Server;
before(async () => {
  server = await startCheckfu();
});
after(async () => {
  await server?.stop();
});

test("for await follows next_page to the end, each item once", async () => {
  const made = new Set<string>();
  for (let i = 0; i < 25; i++) made.add((await server.admin.principals.create({ kind: "service", name: `p-${i}` })).id);
  const list = server.admin.principals.list({ limit: 10 });
  const ids: string[] = [];
  for await (const p of list) ids.push(p.id);
  assert.equal(new Set(ids).size, ids.length, "no item twice");
  for (const id of made) assert.ok(ids.includes(id), `${id} listed`);
  let pages = 0;
  for await (const page of list.pages()) {
    pages++;
    assert.ok(page.data.length <= 10);
  }
  assert.equal(pages, Math.ceil(ids.length / 10));
});

test("a File uploads with progress and downloads as sent", async () => {
  const environmentId = (await server.admin.environments.list().first()).data[0]!.id;
  const bytes = new Uint8Array(1024 * 1024 + 17).map((_, i) => (i * 7) % 251);
  const progress: UploadProgress[] = [];
  const file = await server.admin.files.upload(new Blob([bytes]), {
    environmentId,
    filename: "data.bin",
    contentType: "application/octet-stream",
    onProgress: (p) => progress.push(p),
  });
  assert.equal(file.size_bytes, bytes.byteLength);
  assert.ok(progress.length > 2, "progress in steps");
  assert.ok(progress.every((p, i) => i === 0 || p.loaded > progress[i - 1]!.loaded), "progress only grows");
  const lastProgress = progress.at(-1)!;
  assert.equal(lastProgress.loaded, lastProgress.total, "ends at the whole body");
  const back = new Uint8Array(await (await server.admin.files.getContent(file.id)).arrayBuffer());
  assert.deepEqual(back, bytes);
});

test("a File from a stream of unknown length uploads too", async () => {
  const environmentId = (await server.admin.environments.list().first()).data[0]!.id;
  const chunks = ["hello ", "from ", "a stream"];
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks.shift();
      if (next === undefined) c.close();
      else c.enqueue(new TextEncoder().encode(next));
    },
  });
  const progress: UploadProgress[] = [];
  const file = await server.admin.files.upload(stream, { environmentId, filename: "hello.txt", contentType: "text/plain", onProgress: (p) => progress.push(p) });
  assert.ok(progress.every((p) => p.total === null));
  assert.equal(await (await server.admin.files.getContent(file.id)).text(), "hello from a stream");
});

test("a Skill bundle uploads as a form, and its next version too", async () => {
  const environmentId = (await server.admin.environments.list().first()).data[0]!.id;
  const skillMd = (d: string) => `---\nname: greeter\ndescription: ${d}\n---\nSay hello.\n`;
  const skill = await server.admin.skills.upload([{ path: "SKILL.md", content: skillMd("Greets people.") }, { path: "scripts/hi.sh", content: new Blob(["echo hi\n"]) }], {
    environmentId,
  });
  assert.equal(skill.name, "greeter");
  const v2 = await server.admin.skills.uploadVersion(skill.id, [{ path: "SKILL.md", content: skillMd("Greets people warmly.") }]);
  assert.equal(v2.version, 2);
  const versions = await server.admin.skills.listVersions(skill.id).all();
  assert.deepEqual(versions.map((v) => v.version).sort(), [1, 2]);
});
