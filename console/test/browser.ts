// A real headless Chromium (the distribution's package) driven by
// playwright-core, and the steps every console test shares.

import { mkdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { startCheckfu, type Server } from "../../sdk/typescript/test/harness.js";

/** Where the tests' screenshots go: docs/console/, shown by docs/console.md. */
export const SHOTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../docs/console");

export function chromiumPath(): string {
  return process.env["CHECKFU_CHROMIUM"] ?? "/usr/bin/chromium";
}

export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // As root in a container, without a GPU, on a machine with no network
    // beyond loopback: nothing of Chromium's own may reach out.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

export async function shot(page: Page, name: string): Promise<void> {
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

/** Opens the console and signs in with `apiKey`; resolves when Home shows. */
export async function signIn(page: Page, baseUrl: string, apiKey: string, at = "/console/"): Promise<void> {
  await page.goto(baseUrl + at);
  await page.getByLabel("API key").fill(apiKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
}

/** Every request the page makes to another origin (there must be none). */
export function foreignRequests(page: Page, baseUrl: string): string[] {
  const seen: string[] = [];
  const origin = new URL(baseUrl).origin;
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith("data:")) seen.push(u);
  });
  return seen;
}

/** A live server and a browser for one test file, started before its tests and stopped after. */
export function live(env: Record<string, string> = {}): { server: Server; browser: Browser } {
  const world = {} as { server: Server; browser: Browser };
  before(async () => {
    world.server = await startCheckfu(env);
    world.browser = await launch();
  });
  after(async () => {
    await world.browser?.close();
    await world.server?.stop();
  });
  return world;
}

const axeSource = readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical findings on the page as it is now. */
export async function violations(page: Page): Promise<Violation[]> {
  await page.evaluate(await axeSource);
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document, { resultTypes: ["violations"] })).violations;
  });
  return found.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/** The findings as lines an assertion prints. */
export function described(found: Violation[]): string[] {
  return found.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}
