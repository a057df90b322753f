// §20.3 quality on every page built so far: no serious or critical
// axe-core violation, in the light and the dark theme; sign-in and
// navigation by keyboard alone; the first load's weight.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { described, live, signIn, violations } from "./browser.js";

const world = live();
test("no serious or critical axe-core violation on any page, light or dark", async () => {
  const d = await deploy(world.server.admin);
  const session = await world.server.admin.sessions.create({ agent_deployment_id: d.deployment.id, initial_events: [message(d.adminId, "hi")] });
  await world.server.admin.agents.publishVersion(d.agent.id);
  const bot = await world.server.admin.principals.create({ name: "a11y-bot", kind: "service" });
  const store = await world.server.admin.memoryStores.create({ environment_id: d.environmentId, name: "a11y-notes", owner: { kind: "principal", id: d.adminId } });
  await world.server.admin.memoryStores.writeDocument(store.id, { path: "/a.md", content: "one\n", expected_sha256: null });
  const graph = await world.server.admin.automationGraphs.create({
    created_by_principal_id: d.adminId,
    document: {
      name: "a11y-graph",
      environment_id: d.environmentId,
      service_principal_id: bot.id,
      nodes: [
        { kind: "trigger", id: "hook", trigger: { kind: "webhook", dedupe_key: "/id" } },
        { kind: "step_agent", id: "triage", agent: d.deployment.id, prompt: "Triage {{event.title}}", includeEvent: true },
      ],
      edges: [{ kind: "starts", from: "hook", to: "triage" }],
    },
    layout: { positions: { hook: { x: 20, y: 40 }, triage: { x: 240, y: 40 } } },
  });
  const pages = [
    ["/console/", "Home"],
    ["/console/sessions", "Sessions"],
    [`/console/sessions/${session.id}`, "Transcript"],
    ["/console/approvals", "Approvals"],
    ["/console/agents", "Agents"],
    [`/console/agents/${d.agent.id}`, "Versions"],
    ["/console/profiles", "Profiles"],
    ["/console/governance", "Principals"],
    [`/console/governance/principals/${d.adminId}`, "API keys"],
    ["/console/governance/grants", "Who can do what on what"],
    ["/console/governance/policies", "Action policies"],
    ["/console/governance/audit", "Audit log"],
    ["/console/automations", "Automations"],
    ["/console/automations/graphs", "Automation graphs"],
    [`/console/automations/graphs/${graph.id}`, "a11y-graph"],
    [`/console/automations/graphs/new?environment_id=${d.environmentId}`, "New graph"],
    ["/console/reach", "Connections"],
    ["/console/reach/tools", "Tool sources"],
    ["/console/reach/vaults", "Connection vaults"],
    ["/console/reach/runners", "Runners"],
    ["/console/reach/memory", "Memory stores"],
    [`/console/reach/memory/${store.id}?path=%2Fa.md`, "/a.md"],
    ["/console/reach/skills", "Skills"],
    ["/console/reach/files", "Files"],
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
        described(found),
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
