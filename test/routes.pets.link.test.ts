import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auth, callWith, createPets, expectError, issueKey } from "./helpers";

const NEXT = /^<([^>]+)>; rel="next"$/;

async function keyWithTwoPets(): Promise<string> {
  const { key } = await issueKey();
  await createPets(key, [
    { name: "One", categoryId: 1 },
    { name: "Two", categoryId: 1 },
  ]);
  return key;
}

describe("the next-page Link's origin comes from PUBLIC_ORIGIN, never from the Host header", () => {
  it("a request sent with another Host still gets links on the configured origin", async () => {
    expect(env.PUBLIC_ORIGIN).toBe("https://api.example.com");
    const key = await keyWithTwoPets();
    for (const host of ["https://evil.example", "http://api.example.com:8080"]) {
      const res = await callWith({}, `${host}/v1/pets?limit=1`, { headers: auth(key) });
      expect(res.status).toBe(200);
      const target = res.headers.get("Link")?.match(NEXT)?.[1];
      expect(target, host).toMatch(/^https:\/\/api\.example\.com\/v1\/pets\?limit=1&cursor=/);
    }
  });

  it("another configured origin is used as given", async () => {
    const key = await keyWithTwoPets();
    const res = await callWith(
      { PUBLIC_ORIGIN: "https://pets.example.org" },
      "https://evil.example/v1/pets?limit=1&status=available",
      { headers: auth(key) },
    );
    expect(res.headers.get("Link")?.match(NEXT)?.[1]).toMatch(
      /^https:\/\/pets\.example\.org\/v1\/pets\?limit=1&status=available&cursor=[A-Za-z0-9_-]+$/,
    );
  });

  it('PUBLIC_ORIGIN = "" → a relative reference, which resolves against the request to the next page', async () => {
    const key = await keyWithTwoPets();
    const first = await callWith({ PUBLIC_ORIGIN: "" }, "https://evil.example/v1/pets?limit=1", {
      headers: auth(key),
    });
    const target = first.headers.get("Link")?.match(NEXT)?.[1];
    expect(target).toMatch(/^\/v1\/pets\?limit=1&cursor=[A-Za-z0-9_-]+$/);
    // Resolved against the request's URL it is page 2 on the origin the client used.
    const resolved = new URL(target!, "https://evil.example/v1/pets?limit=1").href;
    const page2 = await callWith({ PUBLIC_ORIGIN: "" }, resolved, { headers: auth(key) });
    expect(page2.status).toBe(200);
    const [firstPet] = (await first.json()) as Array<{ id: number }>;
    const [secondPet] = (await page2.json()) as Array<{ id: number }>;
    expect(secondPet!.id).toBeGreaterThan(firstPet!.id);
  });

  it("an invalid PUBLIC_ORIGIN is a misconfiguration: 500 naming nothing to the client", async () => {
    for (const bad of ["https://api.example.com/", "api.example.com", "ftp://api.example.com"]) {
      const res = await callWith({ PUBLIC_ORIGIN: bad }, "/v1/pets");
      await expectError(res, 500, "internal_error");
    }
  });
});
