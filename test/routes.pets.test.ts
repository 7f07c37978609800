import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { SUNSET_AT } from "../src/schemas/deprecation";
import {
  auth,
  call,
  callWith,
  createPets,
  expectError,
  fixClock,
  issueKey,
  petCount,
  postJson,
} from "./helpers";

type Pet = { id: number; name: string; categoryId: number; status: string };

const ascending = (pets: Pet[]) => pets.every((p, i) => i === 0 || pets[i - 1]!.id < p.id);

describe("GET /v1/pets", () => {
  it("returns at most 20 by default, in ascending id order", async () => {
    const { key } = await issueKey("business");
    await createPets(
      key,
      Array.from({ length: 25 }, (_, i) => ({ name: `dog${i}`, categoryId: 1 })),
    );
    const res = await call("/v1/pets", { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
    const pets = (await res.json()) as Pet[];
    expect(pets).toHaveLength(20);
    expect(ascending(pets)).toBe(true);
    const min = (await env.DB.prepare("SELECT MIN(id) AS m FROM pets").first<{ m: number }>())!.m;
    expect(pets[0]!.id).toBe(min);
  });

  it("honours limit 1..100 and ignores unknown query parameters", async () => {
    const { key } = await issueKey("business");
    await createPets(
      key,
      Array.from({ length: 3 }, (_, i) => ({ name: `cat${i}`, categoryId: 2 })),
    );
    const one = (await (
      await call("/v1/pets?limit=1&foo=bar&page=9", { headers: auth(key) })
    ).json()) as Pet[];
    expect(one).toHaveLength(1);
    const total = await petCount();
    const res = await call("/v1/pets?limit=100", { headers: auth(key) });
    expect(res.status).toBe(200);
    const many = (await res.json()) as Pet[];
    expect(many).toHaveLength(Math.min(100, total));
    expect(ascending(many)).toBe(true);
  });

  it.each(["0", "101", "-1", "abc", "2.5", "", "1e1", " 5"])(
    "limit=%j → 400 naming limit",
    async (limit) => {
      const { key } = await issueKey();
      const body = await expectError(
        await call(`/v1/pets?limit=${encodeURIComponent(limit)}`, { headers: auth(key) }),
        400,
        "invalid_request",
      );
      expect(body.message).toContain("limit");
    },
  );

  it("filters by status", async () => {
    const { key } = await issueKey("business");
    const [sold] = await createPets(key, [
      { name: "sold1", categoryId: 3, status: "sold" },
      { name: "pend1", categoryId: 3, status: "pending" },
    ]);
    const res = await call("/v1/pets?status=sold&limit=100", { headers: auth(key) });
    expect(res.status).toBe(200);
    const pets = (await res.json()) as Pet[];
    expect(pets.length).toBeGreaterThan(0);
    expect(pets.every((p) => p.status === "sold")).toBe(true);
    expect(pets.map((p) => p.id)).toContain(sold!.id);
    expect(ascending(pets)).toBe(true);
  });

  it.each(["Sold", "SOLD", "lost", "", "available,sold"])(
    "status=%j → 400 naming status",
    async (status) => {
      const { key } = await issueKey();
      const body = await expectError(
        await call(`/v1/pets?status=${encodeURIComponent(status)}`, { headers: auth(key) }),
        400,
        "invalid_request",
      );
      expect(body.message).toContain("status");
    },
  );
});

describe("POST /v1/pets", () => {
  it("201 with the pet, its id and Location; status defaults to available; name trimmed", async () => {
    const { key } = await issueKey();
    const res = await postJson("/v1/pets", { name: "  Rex  ", categoryId: 4 }, auth(key));
    expect(res.status).toBe(201);
    const pet = (await res.json()) as Pet;
    expect(pet).toEqual({
      id: expect.any(Number),
      name: "Rex",
      categoryId: 4,
      status: "available",
    });
    expect(res.headers.get("Location")).toBe(`/v1/pets/${pet.id}`);
    const fetched = await call(res.headers.get("Location")!, { headers: auth(key) });
    expect(await fetched.json()).toEqual(pet);
  });

  it("accepts an explicit status, 200-char names, 2^53-1 and a charset parameter", async () => {
    const { key } = await issueKey();
    const name = "n".repeat(200);
    const res = await postJson(
      "/v1/pets",
      { name: `  ${name} `, categoryId: Number.MAX_SAFE_INTEGER, status: "pending" },
      auth(key, { "Content-Type": "application/json; charset=utf-8" }),
    );
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      name,
      categoryId: Number.MAX_SAFE_INTEGER,
      status: "pending",
    });
  });

  const invalid: Array<[string, string, string[]]> = [
    ["201-char name", JSON.stringify({ name: "n".repeat(201), categoryId: 1 }), ["name"]],
    ["empty name", JSON.stringify({ name: "", categoryId: 1 }), ["name"]],
    ["whitespace name", JSON.stringify({ name: "   ", categoryId: 1 }), ["name"]],
    ["numeric name", JSON.stringify({ name: 5, categoryId: 1 }), ["name"]],
    ["categoryId 0", JSON.stringify({ name: "x", categoryId: 0 }), ["categoryId"]],
    ["categoryId -3", JSON.stringify({ name: "x", categoryId: -3 }), ["categoryId"]],
    ["categoryId 1.5", JSON.stringify({ name: "x", categoryId: 1.5 }), ["categoryId"]],
    ["categoryId string", JSON.stringify({ name: "x", categoryId: "5" }), ["categoryId"]],
    ["categoryId 2^53", '{"name":"x","categoryId":9007199254740992}', ["categoryId", "2^53"]],
    ["categoryId 2^53+1", '{"name":"x","categoryId":9007199254740993}', ["categoryId", "2^53"]],
    ["categoryId 1e300", '{"name":"x","categoryId":1e300}', ["categoryId"]],
    ["bad status", JSON.stringify({ name: "x", categoryId: 1, status: "Sold" }), ["status"]],
    ["missing name", JSON.stringify({ categoryId: 1 }), ["name"]],
    ["missing both", "{}", ["name", "categoryId"]],
    [
      "unknown fields",
      JSON.stringify({ name: "x", categoryId: 1, color: "red", id: 7 }),
      ["color", "id"],
    ],
    ["malformed JSON", '{"name": "x", ', []],
    ["empty body", "", []],
    ["array", JSON.stringify([{ name: "x", categoryId: 1 }]), []],
    ["string", JSON.stringify("Rex"), []],
    ["null", "null", []],
    ["number", "42", []],
  ];

  it.each(invalid)("%s → 400 invalid_request, nothing stored", async (_label, body, mentions) => {
    const { key } = await issueKey();
    const before = await petCount();
    const err = await expectError(
      await postJson("/v1/pets", body, auth(key)),
      400,
      "invalid_request",
    );
    for (const word of mentions) expect(err.message).toContain(word);
    expect(await petCount()).toBe(before);
  });

  it.each([["text/plain"], ["application/x-www-form-urlencoded"], ["application/jsonx"], [null]])(
    "Content-Type %j → 415",
    async (type) => {
      const { key } = await issueKey();
      const before = await petCount();
      const headers: Record<string, string> = auth(key);
      if (type) headers["Content-Type"] = type;
      const res = await call("/v1/pets", {
        method: "POST",
        headers,
        body: JSON.stringify({ name: "x", categoryId: 1 }),
      });
      await expectError(res, 415, "unsupported_media_type");
      expect(await petCount()).toBe(before);
    },
  );

  it("16 KiB exactly is accepted; one byte more is 413", async () => {
    const { key } = await issueKey();
    const head = '{"name":"big","categoryId":1';
    const exact = `${head + " ".repeat(16 * 1024 - head.length - 1)}}`;
    expect(new TextEncoder().encode(exact).length).toBe(16384);
    expect((await postJson("/v1/pets", exact, auth(key))).status).toBe(201);
    const before = await petCount();
    const over = `${head + " ".repeat(16 * 1024 - head.length)}}`;
    await expectError(await postJson("/v1/pets", over, auth(key)), 413, "payload_too_large");
    await expectError(
      await postJson("/v1/pets", { name: "x", categoryId: 1, pad: "p".repeat(100_000) }, auth(key)),
      413,
      "payload_too_large",
    );
    expect(await petCount()).toBe(before);
  });

  function streamOf(text: string, chunk = 1024): ReadableStream<Uint8Array> {
    const bytes = new TextEncoder().encode(text);
    let at = 0;
    return new ReadableStream({
      pull(controller) {
        if (at >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(at, at + chunk));
        at += chunk;
      },
    });
  }

  it("a streamed body without Content-Length: small is accepted, over 16 KiB is 413", async () => {
    const { key } = await issueKey();
    const headers = auth(key, { "Content-Type": "application/json" });
    const ok = await call("/v1/pets", {
      method: "POST",
      headers,
      body: streamOf(JSON.stringify({ name: "streamed", categoryId: 9 })),
    });
    expect(ok.status).toBe(201);
    expect(await ok.json()).toMatchObject({ name: "streamed", categoryId: 9 });
    const before = await petCount();
    const big = `{"name":"big","categoryId":1${" ".repeat(40 * 1024)}}`;
    await expectError(
      await call("/v1/pets", { method: "POST", headers, body: streamOf(big) }),
      413,
      "payload_too_large",
    );
    // Straight into the app, so no transport can add a Content-Length on the way.
    const direct = new Request("https://api.example.com/v1/pets", {
      method: "POST",
      headers,
      body: streamOf(big),
      duplex: "half",
    } as RequestInit);
    expect(direct.headers.get("Content-Length")).toBeNull();
    await expectError(await callWith({}, direct), 413, "payload_too_large");
    expect(await petCount()).toBe(before);
  });
});

describe("GET /v1/pets/{petId} (deprecated)", () => {
  function expectDeprecation(res: Response) {
    expect(res.headers.get("Deprecation")).toMatch(/^@\d+$/);
    expect(res.headers.get("Sunset")).toBe("Thu, 05 Dec 2030 00:00:00 GMT");
    expect(res.headers.get("Link")).toBe('</v1/pets>; rel="successor-version"');
  }

  it("200 with the pet and the deprecation headers", async () => {
    const { key } = await issueKey();
    const [made] = await createPets(key, [{ name: "Luna", categoryId: 5, status: "sold" }]);
    const res = await call(`/v1/pets/${made!.id}`, { headers: auth(key) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: made!.id, name: "Luna", categoryId: 5, status: "sold" });
    expectDeprecation(res);
  });

  it("404 not_found for an unknown id, with the deprecation headers", async () => {
    const { key } = await issueKey();
    for (const id of [String((await petCount()) + 10_000), "9007199254740991"]) {
      const res = await call(`/v1/pets/${id}`, { headers: auth(key) });
      expectDeprecation(res);
      await expectError(res, 404, "not_found");
    }
  });

  it.each(["0", "-1", "abc", "1.5", "9007199254740992", "1e3", "+5"])(
    "petId %j → 400 naming petId, with the deprecation headers",
    async (id) => {
      const { key } = await issueKey();
      const res = await call(`/v1/pets/${id}`, { headers: auth(key) });
      expectDeprecation(res);
      const body = await expectError(res, 400, "invalid_request");
      expect(body.message).toContain("petId");
    },
  );

  it("401 carries the deprecation headers too", async () => {
    const res = await call("/v1/pets/1");
    expectDeprecation(res);
    await expectError(res, 401, "unauthorized");
  });

  it("still works one millisecond before the sunset", async () => {
    const { key } = await issueKey();
    const [made] = await createPets(key, [{ name: "Last", categoryId: 1 }]);
    fixClock(SUNSET_AT - 1);
    const res = await call(`/v1/pets/${made!.id}`, { headers: auth(key) });
    expect(res.status).toBe(200);
    expectDeprecation(res);
  });

  it.each([0, 1, 86_400_000 * 365])(
    "410 endpoint_removed at sunset + %i ms, while the other operations keep working",
    async (after) => {
      const { key } = await issueKey();
      const [made] = await createPets(key, [{ name: "Gone", categoryId: 1 }]);
      fixClock(SUNSET_AT + after);
      const res = await call(`/v1/pets/${made!.id}`, { headers: auth(key) });
      expectDeprecation(res);
      const { message } = await expectError(res, 410, "endpoint_removed");
      const day = new Date(SUNSET_AT).toLocaleDateString("en-GB", {
        dateStyle: "long",
        timeZone: "UTC",
      });
      expect(message, "the message names the sunset's day").toContain(`removed on ${day};`);
      expect((await call("/v1/pets?limit=1", { headers: auth(key) })).status).toBe(200);
    },
  );
});
