// Multipart uploads (Files, Skill bundles) with progress.

/** Bytes to upload: a Blob (or File), a byte stream, bytes, or text. */
export type UploadSource = Blob | ReadableStream<Uint8Array> | Uint8Array | ArrayBuffer | string;

/** Reported as the body is handed to the connection. */
export interface UploadProgress {
  /** Bytes sent so far (the form's framing included). */
  loaded: number;
  /** The whole body's size, when every part's size is known. */
  total: number | null;
}

export interface FormPart {
  name: string;
  /** A file part's filename (a Skill file's path in its bundle). */
  filename?: string;
  contentType?: string;
  value: UploadSource;
}

const encoder = new TextEncoder();

function sizeOf(v: UploadSource): number | null {
  if (typeof v === "string") return encoder.encode(v).byteLength;
  if (v instanceof Uint8Array) return v.byteLength;
  if (v instanceof ArrayBuffer) return v.byteLength;
  if (typeof Blob !== "undefined" && v instanceof Blob) return v.size;
  return null;
}

/** A header value with `"`, CR and LF escaped as browsers escape form names. */
function quoted(s: string): string {
  return s.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

async function* chunksOf(v: UploadSource): AsyncGenerator<Uint8Array> {
  if (typeof v === "string") yield encoder.encode(v);
  else if (v instanceof Uint8Array) yield v;
  else if (v instanceof ArrayBuffer) yield new Uint8Array(v);
  else {
    const stream = v instanceof ReadableStream ? v : v.stream();
    const reader = stream.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      reader.releaseLock();
    }
  }
}

/** Slices big chunks so progress moves in steps of at most this many bytes. */
const STEP = 256 * 1024;

/**
 * A `multipart/form-data` body built as a stream, so that `onProgress`
 * hears how much has been sent and nothing is held in memory twice.
 */
export function multipartBody(parts: FormPart[], onProgress?: (p: UploadProgress) => void): { body: ReadableStream<Uint8Array>; contentType: string } {
  const boundary = `----checkfu-${crypto.randomUUID()}`;
  const heads = parts.map((p) => {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(p.name)}"`;
    if (p.filename !== undefined) head += `; filename="${quoted(p.filename)}"`;
    head += "\r\n";
    if (p.contentType || p.filename !== undefined) head += `Content-Type: ${p.contentType ?? "application/octet-stream"}\r\n`;
    return encoder.encode(head + "\r\n");
  });
  const tail = encoder.encode(`--${boundary}--\r\n`);
  const sizes = parts.map((p) => sizeOf(p.value));
  const total = sizes.every((s) => s !== null)
    ? heads.reduce((n, h) => n + h.byteLength + 2, 0) + sizes.reduce<number>((n, s) => n + (s ?? 0), 0) + tail.byteLength
    : null;
  const crlf = encoder.encode("\r\n");
  async function* all(): AsyncGenerator<Uint8Array> {
    for (const [i, part] of parts.entries()) {
      yield heads[i]!;
      for await (const chunk of chunksOf(part.value)) {
        for (let at = 0; at < chunk.byteLength; at += STEP) yield chunk.subarray(at, Math.min(at + STEP, chunk.byteLength));
      }
      yield crlf;
    }
    yield tail;
  }
  const source = all();
  let loaded = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await source.next();
      if (done) {
        controller.close();
        return;
      }
      controller.enqueue(value);
      loaded += value.byteLength;
      onProgress?.({ loaded, total });
    },
    async cancel() {
      await source.return(undefined);
    },
  });
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
