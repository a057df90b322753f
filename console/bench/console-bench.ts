// The console's figures on whatever binary CHECKFU_BIN names (a release
// build for the reported ones): the first load's transferred bytes, the
// time a 10,000-event Session takes to open (fresh tab, signed in, until
// its newest event is on screen; RUNS times), and delta-to-screen latency
// over a 2,000-character streamed message. Run by e2e/bench/console.

import { startCheckfu } from "../../sdk/typescript/test/harness.js";
import { launch } from "../test/browser.js";
import { longSession } from "../test/long-session.js";
import { deltaLatencies, summary, timeToOpen } from "../test/measure.js";

const runs = Number(process.env["RUNS"] ?? 10);
const events = Number(process.env["EVENTS"] ?? 10_000);
const server = await startCheckfu();
const browser = await launch();
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  let bytes = 0;
  cdp.on("Network.loadingFinished", (e: { encodedDataLength: number }) => {
    bytes += e.encodedDataLength;
  });
  await page.goto(`${server.baseUrl}/console/`, { waitUntil: "networkidle" });
  console.log(`first load: ${bytes.toLocaleString()} bytes transferred (HTML, script, style, icon; compressed)`);
  await context.close();

  const t0 = Date.now();
  const long = await longSession(server.admin, events);
  console.log(`seeded a ${long.lastSeq.toLocaleString()}-event Session in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const opens: number[] = [];
  for (let i = 0; i < runs; i++) opens.push(await timeToOpen(browser, server.baseUrl, server.apiKey, long.sessionId, long.lastSeq));
  console.log(`open the ${long.lastSeq.toLocaleString()}-event Session: ${summary(opens)}`);
  const latencies: number[] = [];
  for (let i = 0; i < 3; i++) latencies.push(...(await deltaLatencies(browser, server.baseUrl, server.apiKey, server.admin, long)));
  console.log(`delta to screen: ${summary(latencies)}`);
} finally {
  await browser.close();
  await server.stop();
}
