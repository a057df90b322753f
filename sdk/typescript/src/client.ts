// The client: one typed `call` for every operation, and per-tag namespaces
// made from the same generated table.

import { OPERATIONS } from "./generated/operations.js";
import { CheckfuError } from "./errors.js";
import { Paginator, type Page } from "./paginate.js";
import { streamEvents, type StreamItem, type StreamOptions } from "./stream.js";
import { Transport, type ClientOptions } from "./transport.js";
import { multipartBody, type FormPart, type UploadProgress, type UploadSource } from "./uploads.js";
import type { CallArgs, CallOptions, CallableId, Namespace, OperationId, ResponseOf, Op, ResultOf, Tag } from "./types.js";

type Entry = {
  readonly method: string;
  readonly path: string;
  readonly tag: string;
  readonly name: string;
  readonly pathParams: readonly string[];
  readonly body: "json" | "multipart" | null;
  readonly response: "json" | "binary" | "sse" | "empty";
  readonly paged: boolean;
  readonly idempotencyKey: boolean;
};

const TABLE: Record<string, Entry> = OPERATIONS;

/** Options of an upload: the call's, and progress. */
export interface UploadOptions extends CallOptions {
  onProgress?: (progress: UploadProgress) => void;
}

/** A file of a Skill bundle: its path in the bundle and its bytes. */
export interface BundleFile {
  path: string;
  content: UploadSource;
}

/** Methods written by hand where the generated ones would not serve. */
export interface Extras {
  sessions: {
    /**
     * A Session's primary view, live: every event after `lastEventId`
     * (default: the whole log), then new ones as they are logged,
     * reconnecting with `Last-Event-ID` after a drop. Ends when `signal`
     * aborts or the loop breaks.
     */
    stream(sessionId: string, options?: StreamOptions): AsyncGenerator<StreamItem, void, undefined>;
    /** One thread's view of a multiagent Session, as `stream`. */
    streamThread(sessionId: string, threadId: string, options?: StreamOptions): AsyncGenerator<StreamItem, void, undefined>;
  };
  files: {
    /** Uploads a File (at most 64 MiB) into an Environment. */
    upload(
      file: UploadSource,
      options: UploadOptions & { environmentId: string; filename: string; contentType?: string; expiresInSeconds?: number },
    ): Promise<ResponseOf<Op<"files.uploadFile">>>;
  };
  skills: {
    /** Creates a Skill from its bundle (`SKILL.md` and the rest), sent as a form. */
    upload(files: BundleFile[], options: UploadOptions & { environmentId: string }): Promise<ResponseOf<Op<"skills.createSkill">>>;
    /** Publishes a Skill's next version from its bundle, sent as a form. */
    uploadVersion(skillId: string, files: BundleFile[], options?: UploadOptions): Promise<ResponseOf<Op<"skills.createSkillVersion">>>;
  };
}

/** Every tag's namespace: its generated methods and the hand-written ones. */
export type Namespaces = {
  [T in Tag]: Namespace<T> & (T extends keyof Extras ? Extras[T] : unknown);
};

function queryString(query: Record<string, unknown> | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : "";
}

function fillPath(template: string, values: Record<string, unknown> | undefined): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = values?.[name];
    if (v === undefined || v === null || v === "") throw new TypeError(`${template}: the path parameter ${name} is missing`);
    return encodeURIComponent(String(v));
  });
}

/**
 * The Checkfu API client.
 *
 * ```ts
 * const checkfu = new Checkfu({ baseUrl: "http://127.0.0.1:7420", apiKey });
 * const agent = await checkfu.agents.create({ environment_id, name: "helper", draft: { instructions: "Be brief." } });
 * for await (const s of checkfu.sessions.list({ status: "idle" })) console.log(s.id);
 * ```
 */
export class Checkfu {
  readonly #transport: Transport;

  constructor(options: ClientOptions) {
    this.#transport = new Transport(options);
    const spaces: Record<string, Record<string, unknown>> = {};
    for (const [id, entry] of Object.entries(TABLE)) {
      if (entry.response === "sse" || entry.body === "multipart") continue;
      (spaces[entry.tag] ??= {})[entry.name] = this.#method(id as CallableId, entry);
    }
    const sessions = (spaces["sessions"] ??= {});
    sessions["stream"] = (sessionId: string, options?: StreamOptions) =>
      streamEvents(this.#transport, `/v1/sessions/${encodeURIComponent(sessionId)}/events/stream`, options);
    sessions["streamThread"] = (sessionId: string, threadId: string, options?: StreamOptions) =>
      streamEvents(this.#transport, `/v1/sessions/${encodeURIComponent(sessionId)}/threads/${encodeURIComponent(threadId)}/events/stream`, options);
    const files = (spaces["files"] ??= {});
    files["upload"] = (file: UploadSource, o: Parameters<Extras["files"]["upload"]>[1]) => {
      const parts: FormPart[] = [{ name: "environment_id", value: o.environmentId }];
      if (o.expiresInSeconds !== undefined) parts.push({ name: "expires_in_seconds", value: String(o.expiresInSeconds) });
      const filePart: FormPart = { name: "file", filename: o.filename, value: file };
      if (o.contentType) filePart.contentType = o.contentType;
      parts.push(filePart);
      return this.#upload("files.uploadFile", {}, parts, o);
    };
    const skills = (spaces["skills"] ??= {});
    const bundle = (files: BundleFile[]): FormPart[] => files.map((f) => ({ name: "files", filename: f.path, value: f.content }));
    skills["upload"] = (files: BundleFile[], o: UploadOptions & { environmentId: string }) =>
      this.#upload("skills.createSkill", {}, [{ name: "environment_id", value: o.environmentId }, ...bundle(files)], o);
    skills["uploadVersion"] = (skillId: string, files: BundleFile[], o: UploadOptions = {}) =>
      this.#upload("skills.createSkillVersion", { id: skillId }, bundle(files), o);
    Object.assign(this, spaces);
  }

  /** The server this client talks to (without `/v1`). */
  get baseUrl(): string {
    return this.#transport.baseUrl;
  }

  /**
   * Makes any operation by its id, typed by the generated schema:
   * `client.call("sessions.getSession", { path: { id } })`.
   */
  call<Id extends CallableId>(id: Id, ...args: {} extends CallArgs<Id> ? [args?: CallArgs<Id>] : [args: CallArgs<Id>]): Promise<ResultOf<Id>> {
    const a = (args[0] ?? {}) as CallArgs<Id> & { path?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown };
    return this.#call(id, a) as Promise<ResultOf<Id>>;
  }

  async #call(
    id: OperationId,
    a: CallOptions & { path?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown },
    overrideBody?: { body: BodyInit; contentType: string; replayable: boolean },
  ): Promise<unknown> {
    const entry = TABLE[id];
    if (!entry) throw new TypeError(`Checkfu: no operation ${String(id)}`);
    if (entry.response === "sse") throw new TypeError(`${id} is a stream: read it with sessions.stream or sessions.streamThread`);
    const path = fillPath(entry.path, a.path) + queryString(a.query);
    const headers: Record<string, string> = { accept: "application/json", ...a.headers };
    let body: BodyInit | undefined;
    let replayable = true;
    if (overrideBody) {
      body = overrideBody.body;
      headers["content-type"] = overrideBody.contentType;
      replayable = overrideBody.replayable;
    } else if (entry.body === "json" && a.body !== undefined) {
      body = JSON.stringify(a.body);
      headers["content-type"] = "application/json";
    } else if (entry.body === "multipart" && a.body !== undefined) {
      body = a.body as FormData;
    }
    let key: string | undefined;
    if (a.idempotencyKey !== false && (a.idempotencyKey !== undefined || entry.method === "POST")) {
      key = a.idempotencyKey ?? crypto.randomUUID();
      headers["idempotency-key"] = key;
    }
    const safe = entry.method === "GET" || entry.method === "DELETE" || (entry.idempotencyKey && key !== undefined);
    const init: Parameters<Transport["send"]>[2] = { headers, retryable: safe && replayable };
    if (body !== undefined) init.body = body;
    if (a.signal) init.signal = a.signal;
    if (a.maxRetries !== undefined) init.maxRetries = a.maxRetries;
    const response = await this.#transport.send(entry.method, path, init);
    if (!response.ok) throw await CheckfuError.fromResponse(response);
    if (entry.response === "binary") return response.blob();
    const text = await response.text();
    if (entry.response === "empty" || text === "") return undefined;
    return JSON.parse(text);
  }

  #method(id: CallableId, entry: Entry): (...args: unknown[]) => unknown {
    return (...args: unknown[]) => {
      const path: Record<string, unknown> = {};
      entry.pathParams.forEach((name, i) => (path[name] = args[i]));
      const [first, second] = args.slice(entry.pathParams.length) as [unknown, (CallOptions & { query?: Record<string, unknown> }) | undefined];
      const a: CallOptions & { path: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown } = { path };
      let options: (CallOptions & { query?: Record<string, unknown> }) | undefined;
      if (entry.body === "json") {
        a.body = first;
        options = second;
        if (options?.query) a.query = options.query;
      } else {
        if (first) a.query = first as Record<string, unknown>;
        options = second;
      }
      for (const k of ["idempotencyKey", "signal", "headers", "maxRetries"] as const) {
        if (options?.[k] !== undefined) Object.assign(a, { [k]: options[k] });
      }
      if (entry.paged) {
        return new Paginator((page) => this.#call(id, { ...a, query: { ...a.query, ...(page ? { page } : {}) } }) as Promise<Page<unknown>>);
      }
      return this.#call(id, a);
    };
  }

  #upload(id: OperationId, path: Record<string, unknown>, parts: FormPart[], o: UploadOptions): Promise<never> {
    const { body, contentType } = multipartBody(parts, o.onProgress);
    return this.#call(id, { ...o, path }, { body, contentType, replayable: false }) as Promise<never>;
  }
}

// The namespaces are made in the constructor from the table.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface Checkfu extends Namespaces {}
