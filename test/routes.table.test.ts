import { describe, expect, it } from "vitest";
import { createApp } from "../src/app";
import { RouteTable } from "../src/lib/route-table";
import { routeTable } from "../src/routes/table";

/** "GET /v1/pets" for every route handler the app registers (not middleware, not HEAD). */
function registered(): string[] {
  const seen = new Set<string>();
  for (const { method, path } of createApp().routes) {
    if (method === "ALL") continue; // middleware (app.use), which Hono lists as ALL
    seen.add(`${method} ${path}`);
  }
  return [...seen].sort();
}

describe("the route table (routes/table.ts)", () => {
  it("lists exactly the routes the app registers, with their methods", () => {
    const table = routeTable.routes
      .flatMap((route) => Object.keys(route.methods).map((m) => `${m} ${route.path}`))
      .sort();
    expect(registered().length).toBeGreaterThan(10);
    expect(table).toEqual(registered());
  });

  it("has one entry per path", () => {
    const paths = routeTable.routes.map((r) => r.path);
    expect(new Set(paths).size).toBe(paths.length);
  });

  it("finds a route by a request's path: parameters match one segment, nothing else does", () => {
    expect(routeTable.find("/v1/pets")?.path).toBe("/v1/pets");
    expect(routeTable.find("/v1/pets/42")?.path).toBe("/v1/pets/:petId");
    expect(routeTable.find("/v1/pets/42/x")).toBeUndefined();
    expect(routeTable.find("/v1/pets/")).toBeUndefined();
    expect(routeTable.find("/v1/openapiXjson")).toBeUndefined();
    expect(routeTable.find("/admin/v1/keys/k_1/roll")?.audience).toBe("operator");
    expect(routeTable.find("/admin")?.audience).toBe("page");
  });

  it("says what a method does, HEAD as GET, and nothing for an unknown method or path", () => {
    expect(routeTable.effectOf("GET", "/v1/pets")).toBe("read");
    expect(routeTable.effectOf("HEAD", "/v1/pets/7")).toBe("read");
    expect(routeTable.effectOf("POST", "/v1/pets")).toBe("write");
    expect(routeTable.effectOf("DELETE", "/v1/pets")).toBeUndefined();
    expect(routeTable.effectOf("GET", "/v1/dogs")).toBeUndefined();
    const pets = routeTable.find("/v1/pets");
    expect(pets && RouteTable.methodsOf(pets)).toEqual(["GET", "HEAD", "POST"]);
  });
});
