/** One page of a list: `{data, next_page}` as the API answers it. */
export interface Page<T> {
  data: T[];
  next_page?: string | null;
}

/**
 * A list that follows `next_page` to the end. Iterate it for every item
 * (`for await (const s of client.sessions.list())`), or `.pages()` for the
 * pages; each page is fetched only when the previous one is used up.
 */
export class Paginator<T> implements AsyncIterable<T> {
  readonly #fetchPage: (page: string | undefined) => Promise<Page<T>>;

  constructor(fetchPage: (page: string | undefined) => Promise<Page<T>>) {
    this.#fetchPage = fetchPage;
  }

  /** The pages, first to last. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let token: string | undefined;
    const seen = new Set<string>();
    for (;;) {
      const page = await this.#fetchPage(token);
      yield page;
      const next = page.next_page;
      // A token the server gave twice would loop forever: stop instead.
      if (!next || seen.has(next)) return;
      seen.add(next);
      token = next;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) {
      yield* page.data;
    }
  }

  /** The first page only. */
  async first(): Promise<Page<T>> {
    return this.#fetchPage(undefined);
  }

  /** Every item, up to `max` (default 10,000), in one array. */
  async all(max = 10_000): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this) {
      if (out.length >= max) break;
      out.push(item);
    }
    return out;
  }
}
