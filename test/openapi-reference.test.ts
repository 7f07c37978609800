import { describe, expect, it } from "vitest";
import { call } from "./helpers";

type Operation = {
  operationId: string;
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
  "x-codeSamples"?: Array<{ lang: string; label: string; source: string }>;
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { required?: string[] }> };
};

const DOCUMENTS = [
  ["public", "/v1/openapi.json"],
  ["operator", "/admin/v1/openapi.json"],
] as const;

async function operationsOf(path: string) {
  const doc = (await (await call(path)).json()) as Document;
  const operations = Object.entries(doc.paths).flatMap(([p, item]) =>
    Object.entries(item).map(([method, op]) => ({ path: p, method, op })),
  );
  return { doc, operations };
}

describe.each(DOCUMENTS)("the %s document, for the reference page", (audience, path) => {
  it("declares problem details beside every Error body", async () => {
    const { doc, operations } = await operationsOf(path);
    expect(doc.components.schemas.Problem?.required).toEqual([
      "type",
      "title",
      "status",
      "detail",
      "code",
    ]);
    let errors = 0;
    for (const { op } of operations)
      for (const [status, response] of Object.entries(op.responses)) {
        if (Number(status) < 400 || !response.content) continue;
        errors++;
        expect(response.content["application/json"]?.schema.$ref, status).toBe(
          "#/components/schemas/Error",
        );
        expect(response.content["application/problem+json"]?.schema.$ref, status).toBe(
          "#/components/schemas/Problem",
        );
      }
    expect(errors).toBeGreaterThan(10);
  });

  it("gives every operation a curl sample and a client sample", async () => {
    const { operations } = await operationsOf(path);
    for (const { path: p, method, op } of operations) {
      const samples = op["x-codeSamples"] ?? [];
      expect(
        samples.map((s) => s.label),
        op.operationId,
      ).toEqual(["curl", audience === "public" ? "@animal-store/client" : "fetch"]);
      const [curl, client] = samples;
      // The path (with its parameters filled in) and the method the operation has.
      const pattern = p.replace(/\{[^}]+\}/g, '[^/"?]+');
      expect(curl!.source, op.operationId).toMatch(new RegExp(`"https?://[^"]*${pattern}[?"]`));
      if (method === "head") expect(curl!.source).toContain("--head");
      else if (method !== "get") expect(curl!.source).toContain(`-X ${method.toUpperCase()}`);
      if (audience === "public") expect(client!.source).toContain('from "@animal-store/client"');
    }
  });
});

describe("the public document's client samples use the client's own methods", () => {
  it.each([
    ["listPets", "store.listPets("],
    ["listPets", "store.listAllPets("],
    ["createPet", 'store.createPet({ name: "Rex", categoryId: 1 })'],
    ["getPet", "store.getPet(1)"],
    ["getUsage", "store.usage()"],
    ["getPetHead", 'store.api.HEAD("/pets/{petId}"'],
  ])("%s: %s", async (operationId, text) => {
    const { operations } = await operationsOf("/v1/openapi.json");
    const op = operations.find((o) => o.op.operationId === operationId)!.op;
    expect(op["x-codeSamples"]![1]!.source).toContain(text);
  });

  it("the curl sample of a create sends the example body", async () => {
    const { operations } = await operationsOf("/v1/openapi.json");
    const op = operations.find((o) => o.op.operationId === "createPet")!.op;
    expect(op["x-codeSamples"]![0]!.source).toContain(`-d '{"name":"Rex","categoryId":1}'`);
  });
});

describe("the public document starts with a getting-started section", () => {
  it("key, first call, paging, a 429", async () => {
    const doc = (await (await call("/v1/openapi.json")).json()) as {
      info: { description: string };
    };
    const start = doc.info.description.split("\n\n").slice(0, 2).join("\n\n");
    expect(start).toMatch(/^## Getting started/);
    for (const step of ["Get a key", "first call", "Page through", "Handle a 429"])
      expect(start).toContain(step);
    expect(start).toContain("Retry-After");
    expect(start).toContain('"https://api.example.com/v1/pets?limit=5"');
  });
});
