import { DatabaseError, type Queryable } from "./database-error";

export const BOOKMARK_PATTERN = /^[0-9a-f]{8}(-[0-9a-f]{8,64}){1,8}$/i;

/** Bookmarks sort lexicographically from oldest to newest (D1 glossary); hex case does not count. */
const newer = (a: string, b: string) => (a.toLowerCase() > b.toLowerCase() ? a : b);

/**
 * The request's D1 session (Sessions API): reads may be served by a nearby read replica, while
 * every read sees at least the bookmarks it was given (the client's, a page cursor's). Created on
 * first use, so requests that never touch D1 open none.
 */
export class D1Session {
  #session: D1DatabaseSession | undefined;
  #atLeast: string | undefined;

  constructor(
    private readonly db: D1Database,
    bookmark?: string,
  ) {
    this.#atLeast = bookmark;
  }

  /** Reads must see at least `bookmark`. Call before the first query. */
  atLeast(bookmark: string): void {
    this.#atLeast = this.#atLeast ? newer(this.#atLeast, bookmark) : bookmark;
  }

  get session(): Queryable {
    if (!this.#session) {
      try {
        this.#session = this.db.withSession(this.#atLeast ?? "first-unconstrained");
      } catch (err) {
        throw new DatabaseError(err);
      }
    }
    return this.#session;
  }

  /**
   * The freshest bookmark this request knows: its session's latest, or, when the answer came from
   * a cache without opening one, the newest it was given (the client's, a page cursor's). A cursor
   * carries it so the next page is never older than what the client has seen.
   */
  freshestKnownBookmark(): string | null {
    const latest = this.bookmark();
    if (latest && this.#atLeast) return newer(latest, this.#atLeast);
    return latest ?? this.#atLeast ?? null;
  }

  /** The latest bookmark of this request's session, for the client to send back. */
  bookmark(): string | null {
    return this.#session?.getBookmark() ?? null;
  }
}
