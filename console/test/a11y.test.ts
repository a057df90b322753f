// §20.3 quality on every page built so far: no serious or critical
// axe-core violation, in the light and the dark theme; sign-in and
// navigation by keyboard alone; the first load's weight.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { test } from "node:test";
import type { Page } from "playwright-core";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { live, signIn } from "./browser.js";

const world = live();
const axeSource = readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

async function violations(page: Page): Promise<Violation[]> {
  await page.evaluate(await axeSource);
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document, { resultTypes: ["violations"] })).violations;
  });
  return found.filter((v) => v.impact === "serious" || v.impact === "critical");
}

test("no serious or critical axe-core violation on any page, light or dark", async () => {
  const d = await deploy(world.server.admin);
  const session = await world.server.admin.sessions.create({ agent_deployment_id: d.deployment.id, initial_events: [message(d.adminId, "hi")] });
  await world.server.admin.agents.publishVersion(d.agent.id);
  const pages = [
    ["/console/", "Home"],
    ["/console/sessions", "Sessions"],
    [`/console/sessions/${session.id}`, "Transcript"],
    ["/console/approvals", "Approvals"],
    ["/console/agents", "Agents"],
    [`/console/agents/${d.agent.id}`, "Versions"],
    ["/console/profiles", "Profiles"],
  ] as const;
  for (const colorScheme of ["light", "dark"] as const) {
    const context = await world.browser.newContext({ colorScheme, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signIn(page, world.server.baseUrl, world.server.apiKey);
    for (const [at, heading] of pages) {
      await page.goto(world.server.baseUrl + at);
      await page.getByRole("heading", { name: heading }).first().waitFor();
      await page.waitForLoadState("networkidle").catch(() => undefined);
      const found = await violations(page);
      assert.deepEqual(
        found.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`),
        [],
        `${at} in the ${colorScheme} theme`,
      );
    }
    // The sign-in page too.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API key").waitFor();
    assert.deepEqual(await violations(page), [], `the sign-in page, ${colorScheme}`);
    await context.close();
  }
});

test("sign in and move between pages with the keyboard alone", async () => {
  const context = await world.browser.newContext();
  const page = await context.newPage();
  await page.goto(world.server.baseUrl + "/console/");
  await page.getByLabel("API key").waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "api_key", "the key field takes the first Tab");
  await page.keyboard.type(world.server.apiKey);
  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  // Tab to the Sessions link and follow it.
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press("Tab");
    if ((await page.evaluate(() => document.activeElement?.textContent)) === "Sessions") break;
  }
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Sessions");
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle);
  assert.notEqual(outline, "none", "the focused link shows a focus ring");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Sessions" }).waitFor();
  assert.ok(page.url().endsWith("/console/sessions"));
  await context.close();
});

test("the first load is under 250 KB compressed and nothing comes from another origin", async () => {
  const context = await world.browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  let bytes = 0;
  const foreign: string[] = [];
  const origin = new URL(world.server.baseUrl).origin;
  cdp.on("Network.loadingFinished", (e: { encodedDataLength: number }) => {
    bytes += e.encodedDataLength;
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(origin)) foreign.push(r.url());
  });
  await page.goto(world.server.baseUrl + "/console/", { waitUntil: "networkidle" });
  await page.getByLabel("API key").waitFor();
  console.log(`first load: ${bytes} bytes transferred`);
  assert.ok(bytes > 0 && bytes <= 250 * 1024, `${bytes} bytes`);
  assert.deepEqual(foreign, []);
  await context.close();
});
