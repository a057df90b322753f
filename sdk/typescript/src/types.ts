// The SDK's type vocabulary, derived from the generated schema and table:
// nothing here names a field of the API by hand.

import type { components, operations } from "./generated/schema.js";
import type { OPERATIONS } from "./generated/operations.js";
import type { Paginator } from "./paginate.js";

type Table = typeof OPERATIONS;

/** Every operation id of the API (`sessions.createSession`, ...). */
export type OperationId = keyof Table & keyof operations;

/** An operation's generated description: its parameters, body and responses. */
export type Op<Id extends OperationId> = operations[Id];

/** A schema of the API by its component name (`Schema<"Session">`). */
export type Schema<Name extends keyof components["schemas"]> = components["schemas"][Name];

type JsonOf<C> = C extends { content: { "application/json": infer B } } ? B : never;
type FormOf<C> = C extends { content: { "multipart/form-data": infer B } } ? B : never;
type ContentOf<C> = [JsonOf<C>] extends [never] ? FormOf<C> : JsonOf<C>;

/** The request body of an operation (`never` when it takes none). */
export type BodyOf<O> = O extends { requestBody: infer R }
  ? ContentOf<R>
  : O extends { requestBody?: infer R }
    ? ContentOf<NonNullable<R>>
    : never;

/** The query parameters of an operation (`never` when it takes none). */
export type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? Exclude<Q, undefined> : never;

/** The path parameters of an operation (`never` when it takes none). */
export type PathOf<O> = O extends { parameters: { path?: infer P } } ? Exclude<P, undefined> : never;

type SuccessOf<R> = {
  [K in keyof R]: `${K & (string | number)}` extends `2${string}` ? R[K] : never;
}[keyof R];

/** The JSON answered on success (a union where several 2xx statuses answer). */
export type ResponseOf<O> = O extends { responses: infer R } ? JsonOf<SuccessOf<R>> : never;

/** How the table describes operation `Id`. */
export type EntryOf<Id extends OperationId> = Table[Id];

/** Operations answered with a Server-Sent Events stream (read them with `sessions.stream`). */
export type StreamOperationId = { [Id in OperationId]: EntryOf<Id>["response"] extends "sse" ? Id : never }[OperationId];

/** Operations `call` can make: all but the streams. */
export type CallableId = Exclude<OperationId, StreamOperationId>;

/** What `call` resolves to: the JSON answer, the bytes of a download, or nothing. */
export type ResultOf<Id extends OperationId> = EntryOf<Id>["response"] extends "binary"
  ? Blob
  : EntryOf<Id>["response"] extends "empty"
    ? undefined
    : ResponseOf<Op<Id>>;

/** An item of a paged list operation's `data`. */
export type ItemOf<Id extends OperationId> = ResponseOf<Op<Id>> extends { data: (infer T)[] } ? T : never;

/** Options every call takes. */
export interface CallOptions {
  /**
   * The `Idempotency-Key` header. POSTs get a fresh one unless this is
   * `false`; pass your own to retry an unchanged request across processes.
   */
  idempotencyKey?: string | false;
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
  /** Extra headers. */
  headers?: Record<string, string>;
  /** Retries of a 429/503 or a lost connection, for calls safe to repeat (default: the client's). */
  maxRetries?: number;
}

type PathPart<O> = [PathOf<O>] extends [never] ? { path?: undefined } : { path: PathOf<O> };
type QueryPart<O> = O extends { parameters: { query: infer Q } }
  ? [Q] extends [never] ? { query?: undefined } : { query: Q }
  : [QueryOf<O>] extends [never] ? { query?: undefined } : { query?: QueryOf<O> };
type BodyPart<Id extends OperationId> = EntryOf<Id>["body"] extends "multipart"
  ? { body: FormData }
  : Op<Id> extends { requestBody: unknown }
    ? { body: BodyOf<Op<Id>> }
    : [BodyOf<Op<Id>>] extends [never] ? { body?: undefined } : { body?: BodyOf<Op<Id>> };

/** The arguments of `client.call(id, args)`. */
export type CallArgs<Id extends OperationId> = PathPart<Op<Id>> & QueryPart<Op<Id>> & BodyPart<Id> & CallOptions;

/** The leading positional arguments of a namespace method: its path parameters, in path order. */
type Strings<T> = T extends readonly [unknown, ...infer R] ? [string | number, ...Strings<R>] : [];
type PathArgs<Id extends OperationId> = Strings<EntryOf<Id>["pathParams"]>;

/** Options of a namespace method: the call options, and the query where the body took the argument. */
type MethodOptions<Id extends OperationId> = CallOptions &
  ([QueryOf<Op<Id>>] extends [never] ? unknown : { query?: QueryOf<Op<Id>> });

type Rest<Id extends OperationId> = EntryOf<Id>["body"] extends "json"
  ? Op<Id> extends { requestBody: unknown }
    ? [body: BodyOf<Op<Id>>, options?: MethodOptions<Id>]
    : [body?: BodyOf<Op<Id>>, options?: MethodOptions<Id>]
  : [QueryOf<Op<Id>>] extends [never]
    ? [options?: CallOptions]
    : Op<Id> extends { parameters: { query: unknown } }
      ? [query: QueryOf<Op<Id>>, options?: CallOptions]
      : [query?: QueryOf<Op<Id>>, options?: CallOptions];

/** A namespace method: path parameters, then the body or the query, then options. */
export type Method<Id extends OperationId> = (
  ...args: [...PathArgs<Id>, ...Rest<Id>]
) => EntryOf<Id>["paged"] extends true ? Paginator<ItemOf<Id>> : Promise<ResultOf<Id>>;

/** The tags (resource families), one namespace each. */
export type Tag = EntryOf<OperationId>["tag"];

type IdsOf<T extends Tag> = { [Id in OperationId]: EntryOf<Id>["tag"] extends T ? Id : never }[OperationId];

/** A tag's generated methods (streams and multipart uploads have hand-written ones instead). */
export type Namespace<T extends Tag> = {
  [Id in IdsOf<T> as EntryOf<Id>["response"] extends "sse" ? never : EntryOf<Id>["body"] extends "multipart" ? never : EntryOf<Id>["name"]]: Method<Id>;
};
