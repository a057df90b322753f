// §20.4 acceptance 8: a Session of 10,000 events opens at its end without
// reading its whole log, and scrolls back to its very first event, every
// event once and in order; and a streamed delta reaches the screen. The
// figures are printed here and reported on a release build by
// e2e/bench/console (tests check behaviour, not speed).

import assert from "node:assert/strict";
import { test } from "node:test";
import { live, signIn } from "./browser.js";
import { longSession } from "./long-session.js";
import { deltaLatencies, summary, timeToOpen } from "./measure.js";

const world = live();
const EVENTS = Number(process.env["EVENTS"] ?? 10_000);

test("a 10,000-event Session opens at its end and scrolls to its start; deltas stream to the screen", async () => {
  const long = await longSession(world.server.admin, EVENTS);
  assert.ok(long.lastSeq >= EVENTS, `${long.lastSeq} events`);
  const opened = await timeToOpen(world.browser, world.server.baseUrl, world.server.apiKey, long.sessionId, long.lastSeq);
  console.log(`a ${long.lastSeq.toLocaleString()}-event Session opened in ${opened} ms (debug build)`);

  const context = await world.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const fetched: string[] = [];
  page.on("request", (r) => {
    if (r.url().includes(`/v1/sessions/${long.sessionId}/events`)) fetched.push(r.url());
  });
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/sessions/${long.sessionId}`);
  await page.locator(`[data-seq="${long.lastSeq}"]`).waitFor();
  const first = await page.locator("[data-seq]").count();
  assert.ok(first <= 400, `the page opened with a page of the log, not all of it (${first} events)`);
  assert.ok(
    fetched.some((u) => u.includes(`after_seq=${long.lastSeq - 300}`)),
    `the newest page was asked for by its seq: ${fetched.join(" ")}`,
  );

  // Scrolling up fetches older pages until the first event.
  for (let i = 0; i < 400 && (await page.locator('[data-seq="1"]').count()) === 0; i++) {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(25);
  }
  await page.locator('[data-seq="1"]').waitFor({ timeout: 5_000 });
  const seqs = await page.locator("[data-seq]").evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-seq"))));
  assert.equal(seqs.length, long.lastSeq, "every event once");
  assert.ok(
    seqs.every((s, i) => s === i + 1),
    "in seq order, gapless",
  );
  assert.equal(await page.getByRole("button", { name: /^Show earlier events/ }).count(), 0, "nothing is left to fetch");
  await context.close();

  const latencies = await deltaLatencies(world.browser, world.server.baseUrl, world.server.apiKey, world.server.admin, long);
  assert.ok(latencies.length >= 100, `the deltas were seen on screen (${latencies.length})`);
  console.log(`delta to screen: ${summary(latencies)} (debug build)`);
});
