// A recording proxy in front of the server: everything passes through
// unchanged, and each chunk of a Session's event stream is stamped with the
// wall-clock time it was handed to the browser. Comparing those stamps with
// the time the page shows a delta gives the delta-to-paint latency.

import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Stamp {
  at: number;
  text: string;
}

export interface Recorder {
  baseUrl: string;
  /** The stream chunks sent to the browser, in order. */
  stamps: Stamp[];
  /** Resolves when an event stream's answer has begun (the page is subscribed). */
  streaming: Promise<void>;
  close(): Promise<void>;
}

export async function recordingProxy(target: string): Promise<Recorder> {
  const upstream = new URL(target);
  const stamps: Stamp[] = [];
  let begun: () => void = () => undefined;
  const streaming = new Promise<void>((resolve) => (begun = resolve));
  const server = http.createServer((req, res) => {
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        const isStream = (req.url ?? "").includes("/events/stream");
        if (isStream) begun();
        answer.on("data", (chunk: Buffer) => {
          res.write(chunk);
          if (isStream) stamps.push({ at: Date.now(), text: chunk.toString("utf8") });
        });
        answer.on("end", () => res.end());
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    stamps,
    streaming,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Each preview delta the stream carried (`event: event_delta`), stamped with when the chunk completing its frame was sent. */
export function deltas(stamps: Stamp[]): { at: number; text: string }[] {
  const out: { at: number; text: string }[] = [];
  let pending = "";
  for (const s of stamps) {
    pending += s.text;
    const frames = pending.split("\n\n");
    pending = frames.pop() ?? "";
    for (const frame of frames) {
      const lines = frame.split("\n");
      if (!lines.includes("event: event_delta")) continue;
      const data = lines
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      const p = JSON.parse(data) as { delta?: { text?: string } };
      if (p.delta?.text) out.push({ at: s.at, text: p.delta.text });
    }
  }
  return out;
}
