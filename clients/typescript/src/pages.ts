/**
 * Every list of the API is a cursor page (`{items, next}`); a `Pager` walks them all.
 */

/** One page as the API answers it. */
export interface Page<T> {
  items: T[];
  next?: string | null;
}

/** Reads the page after the cursor `after` (undefined: the first page). */
export type PageReader<T> = (after: string | undefined) => Promise<Page<T>>;

/**
 * Every item of a list, a page at a time: `for await (const r of tzpush.reminders.list(id))`.
 * A page is read only when the one before is used up; `pages()` gives whole pages instead.
 * The cursor is the API's, so a walk never skips or repeats an item when items are added or
 * removed meanwhile.
 */
export class Pager<T> implements AsyncIterable<T> {
  constructor(private readonly read: PageReader<T>) {}

  async *pages(): AsyncGenerator<T[], void, undefined> {
    let after: string | undefined;
    for (;;) {
      const page = await this.read(after);
      yield page.items;
      after = cursorOf(page.next);
      if (after === undefined) return;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const items of this.pages()) yield* items;
  }

  /** Every item in one array (for lists known to be small). */
  async all(): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this) out.push(item);
    return out;
  }
}

/** The `after` cursor of a `next` link (`/v1/...?limit=50&after=...`), or undefined. */
export function cursorOf(next: string | null | undefined): string | undefined {
  if (!next) return undefined;
  return new URL(next, "http://tzpush.invalid").searchParams.get("after") ?? undefined;
}
