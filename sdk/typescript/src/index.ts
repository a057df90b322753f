// @checkfu/sdk: the typed client of the Checkfu API.

export { Checkfu, type Extras, type Namespaces, type UploadOptions, type BundleFile } from "./client.js";
export { CheckfuError } from "./errors.js";
export { Paginator, type Page } from "./paginate.js";
export type { SessionEvent, Preview, StreamItem, StreamOptions } from "./stream.js";
export type { ClientOptions } from "./transport.js";
export type { UploadProgress, UploadSource } from "./uploads.js";
export type {
  BodyOf,
  CallArgs,
  CallOptions,
  CallableId,
  ItemOf,
  Method,
  Namespace,
  Op,
  OperationId,
  PathOf,
  QueryOf,
  ResponseOf,
  ResultOf,
  Schema,
  Tag,
} from "./types.js";
export type { components, operations, paths } from "./generated/schema.js";
export { OPERATIONS } from "./generated/operations.js";
