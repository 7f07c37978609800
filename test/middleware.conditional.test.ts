import { afterEach, describe, expect, it, vi } from "vitest";
import { auth, call, fixClock, issueKey, postJson } from "./helpers";

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
});
