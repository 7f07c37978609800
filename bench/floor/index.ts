// The floor Worker for `npm run bench`: what every authenticated list must do at least, with no
// framework, authentication, validation, cursor or header logic: one RPC to a SQLite-backed
// Durable Object that counts the request durably (as the API's QuotaLimiter does) and, at the same
// time, one D1 query for a page of pets (the API's query, in a D1 session as the API reads),
// answered as JSON with the session's bookmark. POST /seed?n=N inserts N pets.
import { DurableObject } from "cloudflare:workers";

interface Env {
  DB: D1Database;
  COUNTER: DurableObjectNamespace<Counter>;
  /** `npm run bench --limiter-rtt/--d1-rtt`: the same simulated round trips as the API's. */
  BENCH_LIMITER_RTT_MS?: string;
  BENCH_D1_RTT_MS?: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** `call` as a round trip of `rttMs` (half before, half after), as bench/api/simulated-network.ts. */
async function roundTrip<T>(rttMs: number, call: () => Promise<T>): Promise<T> {
  if (rttMs > 0) await sleep(rttMs / 2);
  const result = await call();
  if (rttMs > 0) await sleep(rttMs / 2);
  return result;
}

export class Counter extends DurableObject<Env> {
  #count = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS usage (id INTEGER PRIMARY KEY, count INTEGER NOT NULL) STRICT",
    );
    this.#count =
      ctx.storage.sql.exec<{ count: number }>("SELECT count FROM usage WHERE id = 1").toArray()[0]
        ?.count ?? 0;
  }

  admit(): { count: number } {
    this.#count += 1;
    this.ctx.storage.sql.exec(
      "INSERT INTO usage (id, count) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET count = excluded.count",
      this.#count,
    );
    return { count: this.#count };
  }
}

const LIST =
  "SELECT id, name, category_id AS categoryId, status FROM pets WHERE id > ?1 ORDER BY id LIMIT ?2";
const STATUSES = ["available", "pending", "sold"];

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/v1/pets") {
      // Both at once, as the API overlaps them for a key with room left.
      const session = env.DB.withSession("first-unconstrained");
      const [{ count }, { results }] = await Promise.all([
        roundTrip(Number(env.BENCH_LIMITER_RTT_MS ?? 0), () =>
          env.COUNTER.getByName("bench").admit(),
        ),
        roundTrip(Number(env.BENCH_D1_RTT_MS ?? 0), () => session.prepare(LIST).bind(0, 21).all()),
      ]);
      return Response.json(results.slice(0, 20), {
        headers: {
          "X-RateLimit-Remaining": String(1e12 - count),
          "x-d1-bookmark": session.getBookmark() ?? "",
        },
      });
    }
    if (request.method === "POST" && url.pathname === "/seed") {
      const n = Math.min(Number(url.searchParams.get("n")) || 0, 1000);
      const insert = env.DB.prepare(
        "INSERT INTO pets (name, category_id, status) VALUES (?1, ?2, ?3)",
      );
      if (n > 0)
        await env.DB.batch(
          Array.from({ length: n }, (_, i) =>
            insert.bind(`floor-${i}`, (i % 7) + 1, STATUSES[i % 3]),
          ),
        );
      return Response.json({ seeded: n }, { status: 201 });
    }
    return Response.json(
      { code: "not_found", message: "No such resource.", status: 404 },
      { status: 404 },
    );
  },
};
