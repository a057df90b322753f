// §19.2 acceptance 5: refusals surface as CheckfuError with the envelope's
// type and the request id (403 permission.denied, 409, 429 rate_limited);
// and the retry rule: only calls safe to repeat are retried, bounded.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Checkfu, CheckfuError } from "../src/index.js";
import { deploy } from "./fixtures.js";
import { startCheckfu, type Server } from "./harness.js";

let server: Server;
let limited: Server;
before(async () => {
  server = await startCheckfu();
  // Two requests a second per principal: a burst meets 429.
  limited = await startCheckfu({ CHECKFU_RATE_LIMIT_PER_SECOND: "2" });
});
after(async () => {
  await server?.stop();
  await limited?.stop();
});

async function refusal(p: Promise<unknown>): Promise<CheckfuError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof CheckfuError, `a CheckfuError, not ${String(e)}`);
    return e;
  }
  assert.fail("the call succeeded");
}

test("403 permission.denied, with its request id", async () => {
  const environmentId = (await server.admin.environments.list().first()).data[0]!.id;
  const bot = await server.admin.principals.create({ kind: "service", name: "nobody" });
  const key = await server.admin.apiKeys.create(bot.id, { name: "test" });
  const asBot = server.client({ apiKey: key.secret! });
  const e = await refusal(asBot.agents.create({ environment_id: environmentId, name: "x" }));
  assert.equal(e.status, 403);
  assert.equal(e.type, "permission.denied");
  assert.match(e.requestId ?? "", /^req_/);
  assert.ok(e.message.length > 0);
});

test("409 validation.conflict and idempotency.key_reused", async () => {
  const { agent } = await deploy(server.admin);
  const stale = await refusal(server.admin.agents.update(agent.id, { name: "renamed", expected_version: agent.version + 5 }));
  assert.equal(stale.status, 409);
  assert.equal(stale.type, "validation.conflict");
  assert.match(stale.requestId ?? "", /^req_/);

  const key = crypto.randomUUID();
  await server.admin.principals.create({ kind: "service", name: "once" }, { idempotencyKey: key });
  const reused = await refusal(server.admin.principals.create({ kind: "service", name: "other" }, { idempotencyKey: key }));
  assert.equal(reused.status, 409);
  assert.equal(reused.type, "idempotency.key_reused");
});

test("404 not_found through call()", async () => {
  const e = await refusal(server.admin.call("sessions.getSession", { path: { id: "sess_00000000000000000000000000" } }));
  assert.equal(e.status, 404);
  assert.equal(e.type, "not_found");
});

/** A client on the rate-limited server that records each attempt's method and status. */
function counted(maxRetries: number) {
  const attempts: { method: string; status: number }[] = [];
  const client = new Checkfu({
    baseUrl: limited.baseUrl,
    apiKey: limited.apiKey,
    maxRetries,
    fetch: async (input, init) => {
      const r = await fetch(input, init);
      attempts.push({ method: init?.method ?? "GET", status: r.status });
      return r;
    },
  });
  return { client, attempts };
}

/** Spends the principal's budget of requests for this second. */
async function exhaust() {
  const burst = limited.client({ maxRetries: 0 });
  await Promise.allSettled(Array.from({ length: 10 }, () => burst.principals.list().first()));
}

/**
 * Runs `scenario` right after exhausting the limit until its first attempt
 * met a 429 (a slow machine may cross into the next second first), at
 * most five times; fails if it never did.
 */
async function afterA429(scenario: () => Promise<{ attempts: { status: number }[] }>) {
  for (let round = 0; round < 5; round++) {
    await new Promise((r) => setTimeout(r, 1100));
    await exhaust();
    const { attempts } = await scenario();
    if (attempts[0]?.status === 429) return attempts;
  }
  assert.fail("no round met a 429");
}

test("429 rate_limited surfaces with its request id and retry hint when not retried", async () => {
  let error: CheckfuError | undefined;
  await afterA429(async () => {
    const { client, attempts } = counted(0);
    error = await client.principals.list().first().then(() => undefined, (e: unknown) => e as CheckfuError);
    return { attempts };
  });
  assert.ok(error instanceof CheckfuError);
  assert.equal(error.status, 429);
  assert.equal(error.type, "rate_limited");
  assert.match(error.requestId ?? "", /^req_/);
  assert.ok(Number(error.details["retry_after_seconds"]) >= 1);
});

test("a GET is retried after 429 (Retry-After), bounded, and succeeds", async () => {
  const attempts = await afterA429(async () => {
    const { client, attempts } = counted(5);
    const page = await client.principals.list().first();
    assert.ok(page.data.length >= 1);
    return { attempts };
  });
  assert.ok(attempts.length >= 2 && attempts.length <= 6, `attempts: ${attempts.length}`);
  assert.equal(attempts.at(-1)?.status, 200);
});

test("a POST without an Idempotency-Key is never retried", async () => {
  const attempts = await afterA429(async () => {
    const { client, attempts } = counted(5);
    await client.principals.create({ kind: "service", name: "not-retried" }, { idempotencyKey: false }).catch(() => undefined);
    return { attempts };
  });
  assert.deepEqual(attempts, [{ method: "POST", status: 429 }]);
});

test("a POST with a key the server honours is retried, and creates once", async () => {
  let created: { id: string; name: string } | undefined;
  const attempts = await afterA429(async () => {
    const { client, attempts } = counted(5);
    created = await client.principals.create({ kind: "service", name: `retried-${crypto.randomUUID().slice(0, 8)}` });
    return { attempts };
  });
  assert.ok(attempts.length >= 2, `attempts: ${attempts.length}`);
  await new Promise((r) => setTimeout(r, 1100));
  const all = await limited.client({ maxRetries: 10 }).principals.list({ limit: 100 }).all();
  assert.deepEqual(
    all.filter((p) => p.name === created!.name).map((p) => p.id),
    [created!.id],
  );
});

test("a lost connection is a transport error, never a hang", async () => {
  const client = new Checkfu({ baseUrl: "http://127.0.0.1:9", apiKey: "ck_x", maxRetries: 1, maxRetryDelayMs: 50 });
  const e = await refusal(client.sessions.list().first());
  assert.equal(e.type, "transport");
  assert.equal(e.status, 0);
});
