import { afterEach, describe, expect, it, vi } from "vitest";
import { etagOfText } from "../src/lib/etag";
import { auth, call, createPets, fixClock, issueKey, postJson } from "./helpers";

/** Server-Timing metric names of a response (`cache` when a stored page answered). */
const metricsOf = (res: Response) =>
  (res.headers.get("Server-Timing") ?? "").split(",").map((m) => m.trim().split(";")[0]);

afterEach(() => vi.restoreAllMocks());

describe("ETag and If-None-Match", () => {
  it("304 for a matching ETag, keeping X-RateLimit-* and still counting", async () => {
    // A fixed instant in the middle of a minute: Remaining is compared across requests.
    fixClock(Date.UTC(2030, 2, 4, 9, 15, 30));
    const { key } = await issueKey();
    await postJson("/v1/pets", { name: "Tagged", categoryId: 3 }, auth(key));
    const first = await call("/v1/pets?limit=100", { headers: auth(key) });
    expect(first.status).toBe(200);
    const etag = first.headers.get("ETag")!;
    expect(etag).toMatch(/^(W\/)?"[^"]+"$/);
    const remaining = Number(first.headers.get("X-RateLimit-Remaining"));

    const notModified = await call("/v1/pets?limit=100", {
      headers: auth(key, { "If-None-Match": etag }),
    });
    expect(notModified.status).toBe(304);
    expect(await notModified.text()).toBe("");
    expect(notModified.headers.get("ETag")).toBe(etag);
    expect(notModified.headers.get("X-RateLimit-Limit")).toBe(
      first.headers.get("X-RateLimit-Limit"),
    );
    expect(Number(notModified.headers.get("X-RateLimit-Remaining"))).toBe(remaining - 1);
    expect(notModified.headers.get("X-Request-Id")).toBeTruthy();

    const after = await call("/v1/pets?limit=100", { headers: auth(key) });
    expect(Number(after.headers.get("X-RateLimit-Remaining"))).toBe(remaining - 2);

    // A change to the list changes the ETag: the old one no longer matches.
    await postJson("/v1/pets", { name: "Tagged 2", categoryId: 3 }, auth(key));
    const changed = await call("/v1/pets?limit=100", {
      headers: auth(key, { "If-None-Match": etag }),
    });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("ETag")).not.toBe(etag);
  });

  it("an ETag on getPet 200s too", async () => {
    const { key } = await issueKey();
    const { id } = (await (
      await postJson("/v1/pets", { name: "One", categoryId: 1 }, auth(key))
    ).json()) as { id: number };
    const res = await call(`/v1/pets/${id}`, { headers: auth(key) });
    expect(res.status).toBe(200);
    const etag = res.headers.get("ETag")!;
    expect(etag).toBeTruthy();
    expect(
      (await call(`/v1/pets/${id}`, { headers: auth(key, { "If-None-Match": etag }) })).status,
    ).toBe(304);
  });

  it("a stored page's ETag is its own body's, whether read from D1 or from memory, page by page", async () => {
    const { key } = await issueKey();
    await createPets(
      key,
      [1, 2, 3, 4, 5].map((i) => ({ name: `tag-${i}`, categoryId: i })),
    );
    /** The page at `url` (its ETag checked against its body), and the next page's path. */
    const page = async (url: string) => {
      const res = await call(url, { headers: auth(key) });
      expect(res.status).toBe(200);
      const etag = res.headers.get("ETag")!;
      expect(etag).toBe(etagOfText(await res.text()));
      const next = res.headers.get("Link")?.match(/<https?:\/\/[^/]+([^>]+)>/)?.[1];
      return { etag, next: next!, stored: metricsOf(res).includes("cache") };
    };
    // The first read of each page is D1's; the second is the stored object, tagged before.
    const firstFromD1 = await page("/v1/pets?limit=2");
    const firstStored = await page("/v1/pets?limit=2");
    const secondFromD1 = await page(firstFromD1.next);
    const secondStored = await page(firstFromD1.next);
    expect([firstStored.stored, secondStored.stored]).toEqual([true, true]);
    expect(firstStored.etag).toBe(firstFromD1.etag);
    expect(secondStored.etag).toBe(secondFromD1.etag);
    expect(secondStored.etag).not.toBe(firstStored.etag);
    // A stored page still answers 304 to its tag.
    const notModified = await call("/v1/pets?limit=2", {
      headers: auth(key, { "If-None-Match": firstFromD1.etag }),
    });
    expect(notModified.status).toBe(304);
  });
});
