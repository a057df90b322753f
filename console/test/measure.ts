// What the console's figures are measured with, shared by the acceptance
// test (which prints them) and e2e/bench/console (which reports them on a
// release build): the time a long Session takes to open, and how long a
// streamed delta takes to reach the screen.

import type { Browser } from "playwright-core";
import { message } from "../../sdk/typescript/test/fixtures.js";
import type { Checkfu } from "../../sdk/typescript/src/index.js";
import { signIn } from "./browser.js";
import { deltas, recordingProxy } from "./sse-recorder.js";

/** Opens the Session's page in a fresh, signed-in tab; answers the ms until its newest event is on screen. */
export async function timeToOpen(browser: Browser, baseUrl: string, apiKey: string, sessionId: string, lastSeq: number): Promise<number> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await signIn(page, baseUrl, apiKey, "/console/sessions");
  const started = Date.now();
  await page.goto(`${baseUrl}/console/sessions/${sessionId}`);
  await page.locator(`[data-seq="${lastSeq}"]`).waitFor({ state: "visible", timeout: 30_000 });
  const ms = Date.now() - started;
  await context.close();
  return ms;
}

/**
 * Sends a message whose echo streams as many deltas, through a proxy that
 * stamps each chunk as it leaves for the browser; in the page, a
 * MutationObserver stamps each change of the message being written. Answers
 * each delta's latency (ms from sent to shown).
 */
export async function deltaLatencies(
  browser: Browser,
  baseUrl: string,
  apiKey: string,
  admin: Checkfu,
  session: { sessionId: string; adminId: string },
  chars = 2_000,
): Promise<number[]> {
  const proxy = await recordingProxy(baseUrl);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    await signIn(page, proxy.baseUrl, apiKey, `/console/sessions/${session.sessionId}`);
    await page.getByRole("heading", { name: "Transcript" }).waitFor();
    await page.getByText("live", { exact: true }).waitFor();
    // Previews are live only: the message goes once the page's stream is open.
    await proxy.streaming;
    await page.waitForTimeout(200);
    const lastBefore = (await admin.sessions.get(session.sessionId)).last_seq;
    // The message being written is the preview while deltas arrive, then the
    // persisted agent.message; a burst of deltas may reach the page with the
    // final event and never show as a preview, and is on screen all the same.
    await page.evaluate((after) => {
      const shown: { at: number; text: string }[] = [];
      (window as unknown as { shown: typeof shown }).shown = shown;
      new MutationObserver(() => {
        const final = Array.from(document.querySelectorAll("[data-type='agent.message']")).find((e) => Number(e.getAttribute("data-seq")) > after);
        const el = final?.querySelector(".message") ?? document.querySelector("[data-preview] .message");
        if (el) shown.push({ at: performance.timeOrigin + performance.now(), text: el.textContent ?? "" });
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    }, lastBefore);
    const text = Array.from({ length: chars }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
    await admin.sessions.sendEvent(session.sessionId, message(session.adminId, text) as never);
    await page.locator(`[data-type="agent.message"][data-seq]`).last().waitFor();
    await page.waitForFunction((seq) => Array.from(document.querySelectorAll("[data-type='session.status_idle']")).some((e) => Number(e.getAttribute("data-seq")) > seq), lastBefore);
    const shown = await page.evaluate(() => (window as unknown as { shown: { at: number; text: string }[] }).shown);
    const sent = deltas(proxy.stamps);
    const latencies: number[] = [];
    let written = "";
    for (const d of sent) {
      written += d.text;
      const seen = shown.find((s) => s.text.length >= written.length);
      if (seen) latencies.push(Math.max(0, seen.at - d.at));
    }
    return latencies;
  } finally {
    await context.close();
    await proxy.close();
  }
}

/** `p50 …, p95 …, max …` of a list of milliseconds. */
export function summary(ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
  return `p50 ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms, max ${(s.at(-1) ?? NaN).toFixed(1)} ms over ${s.length}`;
}
