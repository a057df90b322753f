// §20.4 acceptance 3 (the Session half): a Session's page streams the
// transcript live; a message sent from the composer is answered, the
// agent's reply appearing as it is written; interrupt and archive work from
// the page; the Sessions list filters by the URL.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { live, shot, signIn } from "./browser.js";

const world = live();

test("a Session's transcript streams live, and the composer talks to it", async () => {
  const d = await deploy(world.server.admin);
  const session = await world.server.admin.sessions.create({
    agent_deployment_id: d.deployment.id,
    title: "console walk-through",
    initial_events: [message(d.adminId, "hello from the SDK")],
  });
  const context = await world.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/sessions/${session.id}`);
  await page.getByRole("heading", { name: /console walk-through/ }).waitFor();
  // The first turn, replayed from the log.
  await page.locator('[data-type="agent.message"]').first().waitFor();
  await page.locator('[data-type="session.status_idle"]').first().waitFor();

  // A second turn from the composer streams in while the page is open.
  await page.getByLabel("Message").fill("second turn from the console");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator('[data-type="user.message"]', { hasText: "second turn from the console" }).waitFor();
  await page.locator('[data-type="agent.message"]').nth(1).waitFor();
  await page.locator('[data-type="session.status_idle"]').nth(1).waitFor();
  const seqs = await page.locator("[data-seq]").evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-seq"))));
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), "every event once, in order, none missing");
  const logged = await world.server.admin.sessions.listEvents(session.id).all();
  assert.equal(seqs.length, logged.length, "the page shows the whole log");
  await shot(page, "session");

  // The list, filtered by the URL.
  await page.goto(`${world.server.baseUrl}/console/sessions?status=idle`);
  await page.getByRole("link", { name: "console walk-through" }).waitFor();
  assert.equal(await page.getByLabel("Status").inputValue(), "idle");
  await shot(page, "sessions");
  await page.goto(`${world.server.baseUrl}/console/sessions?status=terminated`);
  await page.getByText("No Session matches these filters.").waitFor();

  // Archive, behind a confirmation.
  await page.goto(`${world.server.baseUrl}/console/sessions/${session.id}`);
  page.once("dialog", (dialog) => void dialog.accept());
  await page.getByRole("button", { name: "Archive" }).click();
  await page.getByText("This Session is terminated; it takes no more input.").waitFor();
  assert.equal((await world.server.admin.sessions.get(session.id)).status, "terminated", "archived is terminated");
  assert.equal(await page.getByLabel("Message").count(), 0, "the composer is gone");
  await context.close();
});

test("the Session page and the errors it shows at 390 px", async () => {
  const context = await world.browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/sessions/sess_00000000000000000000000000");
  const alert = page.getByRole("alert");
  await alert.waitFor();
  const text = await alert.innerText();
  assert.match(text, /not_found/, "the API's type");
  assert.match(text, /request_id: req_/, "and its request id");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `nothing wider than the screen (${overflow} px over)`);
  await context.close();
});
