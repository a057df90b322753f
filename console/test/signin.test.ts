// §20.4 acceptance 1 and 2: sign in with a key, reload keeps the session,
// the key is in no storage, cookie or URL, revoking the key signs the
// console out within 5 s, sign-out ends the session server-side; a
// cross-origin change without Checkfu-CSRF is 403; the CSP and the other
// headers are on every console answer; the key exchange is throttled.

import assert from "node:assert/strict";
import { test } from "node:test";
import { foreignRequests, live, shot, signIn } from "./browser.js";

const world = live();

async function adminKey(name: string): Promise<{ id: string; secret: string }> {
  const admin = (await world.server.admin.principals.list().all()).find((p) => p.name === "admin")!;
  const key = await world.server.admin.apiKeys.create(admin.id, { name });
  return { id: key.id, secret: key.secret! };
}

test("sign in, reload, nothing of the key kept, revocation signs out within 5 s", async () => {
  const key = await adminKey("console-1");
  const context = await world.browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const foreign = foreignRequests(page, world.server.baseUrl);
  await page.goto(world.server.baseUrl + "/console/");
  await page.getByLabel("API key").waitFor();
  await shot(page, "sign-in");
  await signIn(page, world.server.baseUrl, key.secret);
  await page.getByRole("heading", { name: "Home" }).waitFor();
  await page.getByText("Capabilities").waitFor();
  await page.getByRole("heading", { name: "Environments" }).waitFor();
  await page.locator(".card li").first().waitFor();
  await shot(page, "home");

  await page.reload();
  await page.getByRole("button", { name: "Sign out" }).waitFor();

  const storage = await page.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookie: document.cookie }));
  assert.ok(!storage.includes(key.secret), "the key is in no storage or script-readable cookie");
  assert.ok(!page.url().includes(key.secret), "nor in the URL");
  const cookies = await context.cookies();
  for (const c of cookies) assert.ok(!c.value.includes(key.secret), `cookie ${c.name} holds no key`);
  const session = cookies.find((c) => c.name === "checkfu_session");
  assert.ok(session, "a session cookie");
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, "Strict");
  assert.equal(session.path, "/");
  assert.ok(session.expires > Date.now() / 1000 && session.expires <= Date.now() / 1000 + 12 * 3600 + 60, "it lasts at most 12 h");
  assert.ok(!storage.includes(session.value), "script never sees the session token");

  // Revoke the key: the next action shows the console signed out.
  await world.server.admin.apiKeys.revoke(key.id);
  const revokedAt = Date.now();
  await page.getByRole("link", { name: "Sessions" }).click();
  await page.getByText("Your console session has ended").waitFor({ timeout: 5_000 });
  assert.ok(Date.now() - revokedAt < 5_000, "signed out within 5 s");
  await page.getByLabel("API key").waitFor();
  await shot(page, "signed-out");
  assert.deepEqual(foreign, [], "nothing was fetched from another origin");
  await context.close();
});

test("sign-out ends the session on the server, not only in the browser", async () => {
  const key = await adminKey("console-2");
  const context = await world.browser.newContext();
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, key.secret);
  const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
  const before = await fetch(`${world.server.baseUrl}/v1/console/sessions/current`, { headers: { cookie } });
  assert.equal(before.status, 200);
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API key").waitFor();
  const afterwards = await fetch(`${world.server.baseUrl}/v1/console/sessions/current`, { headers: { cookie } });
  assert.equal(afterwards.status, 401, "the old cookie no longer works");
  assert.equal(((await afterwards.json()) as { error: { type: string } }).error.type, "auth.invalid_key");
  await context.close();
});

test("a cross-origin change with the cookie and without Checkfu-CSRF is 403; the headers are strict", async () => {
  const key = await adminKey("console-3");
  const context = await world.browser.newContext();
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, key.secret);
  const jar = await context.cookies();
  const cookie = jar.map((c) => `${c.name}=${c.value}`).join("; ");
  const csrf = jar.find((c) => c.name === "checkfu_csrf")!.value;
  const environmentId = (await world.server.admin.environments.list().first()).data[0]!.id;
  const body = JSON.stringify({ environment_id: environmentId, name: "forged" });
  const post = (headers: Record<string, string>) =>
    fetch(`${world.server.baseUrl}/v1/agents`, { method: "POST", headers: { "content-type": "application/json", cookie, ...headers }, body });

  const crossOrigin = await post({ origin: "https://evil.example", "sec-fetch-site": "cross-site" });
  assert.equal(crossOrigin.status, 403);
  const refusal = (await crossOrigin.json()) as { error: { type: string; details: { reason?: string } } };
  assert.equal(refusal.error.type, "permission.denied");
  assert.equal(refusal.error.details.reason, "csrf");
  assert.equal((await post({ origin: "https://evil.example", "checkfu-csrf": csrf })).status, 403, "the token does not help another origin");
  assert.equal((await post({})).status, 403, "nor does the cookie alone");
  assert.equal((await post({ "checkfu-csrf": "csrf_forged" })).status, 403, "nor a token that is not the session's");
  const origin = new URL(world.server.baseUrl).origin;
  assert.equal((await post({ origin, "checkfu-csrf": csrf })).status, 201, "the console's own request passes");
  const agents = await world.server.admin.agents.list({ environment_id: environmentId }).all();
  assert.equal(agents.filter((a) => a.name === "forged").length, 1, "exactly the one allowed request created anything");

  // The console made its own change through the same check (sign-out).
  for (const at of ["/console/", "/console/sessions/sess_x", "/console/assets/app.js"]) {
    const r = await fetch(world.server.baseUrl + at);
    assert.equal(r.status, 200, at);
    const csp = r.headers.get("content-security-policy") ?? "";
    for (const part of ["default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"]) {
      assert.ok(csp.includes(part), `${at}: CSP has ${part}: ${csp}`);
    }
    assert.ok(!csp.includes("unsafe-inline") && !csp.includes("unsafe-eval"), "no inline script, no eval");
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    assert.equal(r.headers.get("referrer-policy"), "no-referrer");
  }
  await context.close();
});

test("the key exchange is throttled like invalid keys", async () => {
  let status = 0;
  for (let i = 0; i < 30 && status !== 429; i++) {
    const r = await fetch(`${world.server.baseUrl}/v1/console/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ api_key: `ck_wrong${i}` }),
    });
    status = r.status;
    if (status !== 429) assert.equal(status, 401, "a wrong key is 401 until the address is throttled");
  }
  assert.equal(status, 429, "then the address is refused");
  // A key that works still signs in from the throttled address.
  const ok = await fetch(`${world.server.baseUrl}/v1/console/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_key: world.server.apiKey }),
  });
  assert.equal(ok.status, 201, "the admin key authenticated before, so it passes the throttle");
});
