// §19.2 acceptance 4: a stream whose connection is dropped mid-turn (a TCP
// proxy between the SDK and the server cuts every socket) resumes with
// Last-Event-ID and yields every seq exactly once; previews come typed
// apart from logged events.

import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import type { SessionEvent, StreamItem } from "../src/index.js";
import { deploy, message } from "./fixtures.js";
import { startCheckfu, type Server } from "./harness.js";

/** A TCP proxy to `target` whose open connections the test can cut. */
async function proxy(target: URL) {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const forget = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", forget).on("close", forget);
    upstream.on("error", forget).on("close", forget);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    dropAll() {
      for (const s of sockets) s.destroy();
    },
    close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      return closed;
    },
  };
}

let server: Server;
before(async () => {
  server = await startCheckfu();
});
after(async () => {
  await server?.stop();
});

test("a stream dropped mid-turn resumes and yields every seq exactly once", async () => {
  const { deployment, adminId } = await deploy(server.admin);
  const p = await proxy(new URL(server.baseUrl));
  const client = server.client({ baseUrl: p.url });
  const session = await client.sessions.create({ agent_deployment_id: deployment.id });
  const controller = new AbortController();
  const seen: SessionEvent[] = [];
  const previews: StreamItem[] = [];
  let drops = 0;
  let idles = 0;
  const stream = client.sessions.stream(session.id, { eventDeltas: ["agent.message"], signal: controller.signal });
  let failed: unknown;
  const reading = (async () => {
    for await (const item of stream) {
      if (item.kind === "preview") {
        previews.push(item);
        continue;
      }
      seen.push(item.event);
      // Mid-turn: the Run has started and nothing after it has been read.
      if (item.event.type === "run.created") {
        p.dropAll();
        drops++;
      }
      if (item.event.type === "session.status_idle" && ++idles === 2) return;
    }
  })().catch((e: unknown) => {
    failed = e;
  });
  for (const text of ["first turn", "second turn, a longer message so that its previews come in several pieces"]) {
    const before = idles;
    await client.sessions.sendEvent(session.id, message(adminId, text));
    const until = Date.now() + 30_000;
    while (idles === before) {
      if (failed) throw failed;
      assert.ok(Date.now() < until, `the turn "${text}" never went idle on the stream`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  await reading;
  controller.abort();
  if (failed) throw failed;
  assert.equal(drops, 2, "both turns were cut mid-turn");
  assert.ok(p.connections() >= 4, `the stream reconnected after each drop (${p.connections()} connections)`);
  assert.deepEqual(
    seen.map((e) => e.seq),
    seen.map((_, i) => i + 1),
    "every seq from 1, exactly once, in order",
  );
  const logged = await server.admin.sessions.listEvents(session.id, { limit: 1000 }).all();
  const upToIdle = logged.slice(0, seen.length);
  assert.deepEqual(seen, upToIdle, "the stream yields the log itself");
  const replies = seen.filter((e) => e.type === "agent.message");
  assert.equal(replies.length, 2);
  // Previews: typed apart, no seq, each message's deltas a prefix of its text.
  for (const item of previews) {
    assert.ok(item.kind === "preview" && !("seq" in item.preview));
  }
  const last = replies.at(-1)!;
  const text = (last.payload["content"] as { text: string }[])[0]!.text;
  const byPreview = new Map<string, string>();
  for (const item of previews) {
    if (item.kind === "preview" && item.preview.type === "event_delta") {
      byPreview.set(item.preview.preview_id, (byPreview.get(item.preview.preview_id) ?? "") + (item.preview.delta?.text ?? ""));
    }
  }
  assert.ok([...byPreview.values()].every((t) => text.startsWith(t) || (replies[0]!.payload["content"] as { text: string }[])[0]!.text.startsWith(t)));
  await p.close();
});

test("a stream opened after a seq replays only what follows it", async () => {
  const { deployment, adminId } = await deploy(server.admin);
  const session = await server.admin.sessions.create({ agent_deployment_id: deployment.id, initial_events: [message(adminId, "hi")] }, { idempotencyKey: crypto.randomUUID() });
  let idle: SessionEvent | undefined;
  for await (const item of server.admin.sessions.stream(session.id)) {
    if (item.kind === "event" && item.event.type === "session.status_idle") {
      idle = item.event;
      break;
    }
  }
  assert.ok(idle);
  await server.admin.sessions.sendEvent(session.id, message(adminId, "again"));
  const after: number[] = [];
  for await (const item of server.admin.sessions.stream(session.id, { lastEventId: idle.seq })) {
    if (item.kind !== "event") continue;
    after.push(item.event.seq);
    if (item.event.type === "session.status_idle") break;
  }
  assert.equal(after[0], idle.seq + 1);
  assert.deepEqual(after, after.map((_, i) => idle!.seq + 1 + i));
});
