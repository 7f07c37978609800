// Concurrency: many simultaneous creates never collide or get lost, and simultaneous requests on
// one key admit exactly its quota (the key's Durable Object serialises admit()).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auth, call, fixClock, issueKey, postJson } from "./helpers";

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}

const STATUSES = ["available", "pending", "sold"] as const;

describe("simultaneous creates (slow: 300 real requests through D1 at once)", () => {
  it("300 parallel POST /v1/pets yield 300 distinct ids, all stored and all listed", {
    timeout: 60_000,
  }, async () => {
    const { key } = await issueKey("enterprise", { perMinute: 1_000_000, perDay: 1_000_000_000 });
    const N = 300;
    const run = crypto.randomUUID().slice(0, 8);
    const inputs = Array.from({ length: N }, (_, i) => ({
      name: `par-${run}-${i}`,
      categoryId: i + 1,
      status: STATUSES[i % 3]!,
    }));

    const responses = await Promise.all(inputs.map((pet) => postJson("/v1/pets", pet, auth(key))));
    const statuses = responses.map((r) => r.status);
    expect(
      statuses.filter((s) => s !== 201),
      `non-201 statuses: ${JSON.stringify(statuses.filter((s) => s !== 201))}`,
    ).toEqual([]);
    const created = (await Promise.all(responses.map((r) => r.json()))) as Pet[];

    // Each response echoes its own input (no cross-talk between concurrent requests) …
    created.forEach((pet, i) => expect(pet).toEqual({ id: expect.any(Number), ...inputs[i] }));
    responses.forEach((r, i) =>
      expect(r.headers.get("Location")).toBe(`/v1/pets/${created[i]!.id}`),
    );
    // … and the ids are distinct.
    const ids = created.map((p) => p.id);
    expect(new Set(ids).size).toBe(N);

    // Every created pet is in the table, exactly as answered.
    const { results } = await env.DB.prepare(
      "SELECT id, name, category_id AS categoryId, status FROM pets WHERE name LIKE ?1 ORDER BY id",
    )
      .bind(`par-${run}-%`)
      .all<Pet>();
    expect(results).toEqual([...created].sort((a, b) => a.id - b.id));

    // Every one is readable through the API (getPet) …
    const reads = await Promise.all(
      ids.map((id) => call(`/v1/pets/${id}`, { headers: auth(key) })),
    );
    expect(reads.map((r) => r.status)).toEqual(ids.map(() => 200));
    expect(await Promise.all(reads.map((r) => r.json()))).toEqual(created);

    // … and listed: paging through GET /v1/pets?limit=100 by its Link rel="next" visits every pet
    // in the table once, in ascending id order, ours among them exactly as created.
    const listed: Pet[] = [];
    for (let path: string | null = "/v1/pets?limit=100", pages = 0; path; pages++) {
      expect(pages, "too many pages: the cursor does not advance").toBeLessThan(50);
      const res = await call(path, { headers: auth(key) });
      expect(res.status).toBe(200);
      listed.push(...((await res.json()) as Pet[]));
      const next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get("Link") ?? "")?.[1];
      path = next ? next.slice(next.indexOf("/v1/")) : null;
    }
    const allIds = (
      await env.DB.prepare("SELECT id FROM pets ORDER BY id").all<{ id: number }>()
    ).results.map((r) => r.id);
    expect(listed.map((p) => p.id)).toEqual(allIds);
    expect(listed.filter((p) => p.name.startsWith(`par-${run}-`))).toEqual(
      [...created].sort((a, b) => a.id - b.id),
    );
  });
});

describe("simultaneous requests on one key (slow: hundreds of real requests through the key's object)", () => {
  it("250 parallel requests on a key with perMinute 40 admit exactly 40", {
    timeout: 60_000,
  }, async () => {
    // A fixed instant in the middle of a minute: no window rolls over during the burst.
    fixClock(Date.UTC(2027, 0, 15, 12, 30, 20));
    const { key, id } = await issueKey("enterprise", { perMinute: 40, perDay: 1_000_000 });

    const responses = await Promise.all(
      Array.from({ length: 250 }, () => call("/v1/pets?limit=1", { headers: auth(key) })),
    );
    const admitted = responses.filter((r) => r.status !== 429);
    const refused = responses.filter((r) => r.status === 429);
    expect(admitted.length).toBe(40);
    expect(refused.length).toBe(210);
    expect(admitted.map((r) => r.status)).toEqual(admitted.map(() => 200));

    // Each admitted request saw its own count: remaining values are exactly 39, 38, …, 0.
    const remaining = admitted
      .map((r) => Number(r.headers.get("X-RateLimit-Remaining")))
      .sort((a, b) => b - a);
    expect(remaining).toEqual(Array.from({ length: 40 }, (_, i) => 39 - i));
    for (const r of admitted) expect(r.headers.get("X-RateLimit-Limit")).toBe("40");

    // Refusals are Error bodies with Retry-After: rate_limited first, then (past the ban threshold) key_banned.
    const bodies = (await Promise.all(refused.map((r) => r.json()))) as Array<{
      code: string;
      status: number;
      message: string;
    }>;
    for (const [i, body] of bodies.entries()) {
      expect(body.status).toBe(429);
      expect(typeof body.message).toBe("string");
      expect(["rate_limited", "key_banned"]).toContain(body.code);
      expect(Number(refused[i]!.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
      expect(refused[i]!.headers.get("Content-Type")).toMatch(/^application\/json/);
    }

    // The key's object agrees: 40 counted in the minute and in the day, none of the refusals.
    const usage = await env.QUOTA.getByName(id).usage();
    expect(usage.minute.count).toBe(40);
    expect(usage.day.count).toBe(40);
  });

  it("two keys hammered at once do not share a budget", { timeout: 60_000 }, async () => {
    fixClock(Date.UTC(2027, 0, 15, 13, 0, 5));
    const a = await issueKey("enterprise", { perMinute: 25, perDay: 1_000_000 });
    const b = await issueKey("enterprise", { perMinute: 15, perDay: 1_000_000 });
    const fire = (key: string) =>
      Array.from({ length: 100 }, () => call("/v1/pets?limit=1", { headers: auth(key) }));
    const [ra, rb] = await Promise.all([Promise.all(fire(a.key)), Promise.all(fire(b.key))]);
    expect(ra.filter((r) => r.status === 200).length).toBe(25);
    expect(rb.filter((r) => r.status === 200).length).toBe(15);
    expect([...ra, ...rb].every((r) => r.status === 200 || r.status === 429)).toBe(true);
  });
});
