/// <reference types="vite/client" />
// The prose and the OpenAPI documents say the same: the README's operation table names the
// public document's operations, its error table the document's error codes (each with its status,
// the one ERROR_STATUS gives), and the headers the prose promises on every answer are declared.
import { describe, expect, it } from "vitest";
import { ERROR_CODES, ERROR_STATUS } from "../src/lib/errors";
import { call } from "./helpers";

// Read at transform time by Vite.
const readme = Object.values(
  import.meta.glob<string>("../README.md", { query: "?raw", import: "default", eager: true }),
)[0]!;

type Response = { headers?: Record<string, { $ref: string }> };
type Doc = {
  paths: Record<
    string,
    Record<string, { operationId: string; responses: Record<string, Response> }>
  >;
  components: { schemas: { Error: { properties: { code: { enum: string[] } } } } };
};
const documentOf = async (path: string) => (await (await call(path)).json()) as Doc;

/** The rows of the markdown table under `heading` (the first table after it), as cells. */
function tableAfter(heading: string): string[][] {
  const start = readme.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const lines = readme.slice(start).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

describe("README and the public document agree", () => {
  it("the operation table names every operation of the document (HEAD and OPTIONS aside) and no other", async () => {
    const doc = await documentOf("/v1/openapi.json");
    const documented = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([method]) => method !== "head" && method !== "options")
        .map(([method, op]) => `${method.toUpperCase()} /v1${path} ${op.operationId}`),
    );
    const rows = tableAfter("## The API").map(
      ([operation, id]) => `${operation!.replaceAll("`", "")} ${id!.replaceAll("`", "")}`,
    );
    expect(rows.sort()).toEqual(documented.sort());
  });

  it("the error table has every error code, each with its status, and the document's Error lists the same codes", async () => {
    const rows = tableAfter("### Errors").map(([code, status]) => [
      code!.replaceAll("`", ""),
      Number(status),
    ]);
    const operatorOnly = ["forbidden", "key_revoked"]; // named in the paragraph after the table
    expect(Object.fromEntries(rows)).toEqual(
      Object.fromEntries(
        ERROR_CODES.filter((c) => !operatorOnly.includes(c)).map((c) => [c, ERROR_STATUS[c]]),
      ),
    );
    for (const code of operatorOnly) expect(readme).toMatch(new RegExp(`\`${code}\` \\(\\d{3}`));
    for (const path of ["/v1/openapi.json", "/admin/v1/openapi.json"]) {
      const doc = await documentOf(path);
      expect(doc.components.schemas.Error.properties.code.enum, path).toEqual(ERROR_CODES);
    }
  });

  it("what the prose promises on answers is declared: WWW-Authenticate on 401, Allow on 405, Retry-After on 429, the quota headers", async () => {
    expect(readme).toContain("`WWW-Authenticate: Bearer …`");
    expect(readme).toContain("`Allow` lists the methods");
    const doc = await documentOf("/v1/openapi.json");
    const headersOf = (status: string) =>
      Object.values(doc.paths)
        .flatMap((methods) => Object.values(methods))
        .map((op) => op.responses[status])
        .filter((r): r is Response => r !== undefined)
        .map((r) => Object.keys(r.headers ?? {}));
    for (const names of headersOf("401")) expect(names).toContain("WWW-Authenticate");
    for (const names of headersOf("405")) expect(names).toContain("Allow");
    for (const names of headersOf("429"))
      expect(names).toEqual(
        expect.arrayContaining(["Retry-After", "X-RateLimit-Limit", "RateLimit"]),
      );
    expect(headersOf("405").length).toBe(4); // one OPTIONS per path
  });
});
