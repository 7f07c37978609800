// The rules the service checks in code, as the OpenAPI documents state them in JSON Schema
// `pattern`s: each pattern, compiled as JSON Schema validators compile it (ECMA-262 with the `u`
// flag), accepts exactly what the service's own schema accepts.

import { z } from "@hono/zod-openapi";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DISPLAY_NAME_PATTERN,
  DisplayNameSchema,
  INTEGER_PATTERN,
  PAGE_LIMIT_PATTERN,
  pageLimit,
  positiveIdString,
  SINGLE_LINE_TEXT_PATTERN,
  singleLineText,
} from "../src/schemas/common";
import { CreatePetHeadersSchema, IDEMPOTENCY_KEY_PATTERN } from "../src/schemas/pets";
import { call } from "./helpers";

const compiled = (pattern: string) => new RegExp(pattern, "u");

/** Characters that sit on the edge of some rule, and ordinary ones. */
const NAME_UNITS = [
  "a",
  "Z",
  "7",
  " ",
  "\t",
  "\n",
  "\u00a0",
  "\ufeff",
  "\u3000",
  "\u0000",
  "\u001f",
  "\u007f",
  "\u0085",
  "\u009f",
  "\u00ad",
  "\u200b",
  "\u200d",
  "\u2060",
  "\u202a",
  "\u202e",
  "\u2066",
  "\u2069",
  "\u2028",
  "\u2029",
  "\u2800",
  "\u3164",
  "\u0301",
  "\ufe0f",
  "\ud800",
  "\udfff",
  "😀",
  "👨‍👩‍👧",
  "ق",
  "ß",
];

const IDEMPOTENCY_UNITS = ["a", "Z", "0", "-", " ", '"', ",", "~", "!", "#", "\u007f", "é", "\t"];

describe("the documents' patterns accept what the service accepts", () => {
  const agree = (pattern: string, accepts: (value: string) => boolean) => (value: string) => {
    expect(compiled(pattern).test(value), JSON.stringify(value)).toBe(accepts(value));
  };

  it("a display name (pet and key names, owner ids)", () => {
    const accepts = (v: string) => DisplayNameSchema.safeParse(v).success;
    const check = agree(DISPLAY_NAME_PATTERN, accepts);
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...NAME_UNITS), maxLength: 12 }), check),
      { numRuns: 3000 },
    );
    // The length limit, with and without whitespace around the name and with emoji (one
    // character each, two UTF-16 units).
    for (const value of [
      "x".repeat(200),
      "x".repeat(201),
      ` ${"x".repeat(200)}\n`,
      "😀".repeat(200),
      "😀".repeat(201),
      `\u200b${"x".repeat(199)}`,
      `\u200b${"x".repeat(200)}`,
      "",
      "   ",
    ])
      check(value);
    expect(accepts("😀".repeat(200))).toBe(true);
    expect(accepts("x".repeat(201))).toBe(false);
  });

  it("single-line text (a webhook endpoint's description)", () => {
    const schema = singleLineText(z.string());
    const check = agree(SINGLE_LINE_TEXT_PATTERN, (v) => schema.safeParse(v).success);
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...NAME_UNITS), maxLength: 12 }), check),
      { numRuns: 3000 },
    );
    for (const value of ["", " ", "a\u200eb", "a\u200fb", "\u202e", "\u2029", "\u0085", "\ud800"])
      check(value);
  });

  it("an Idempotency-Key", () => {
    const schema = CreatePetHeadersSchema.shape["idempotency-key"];
    const check = agree(IDEMPOTENCY_KEY_PATTERN, (v) => schema.safeParse(v).success);
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...IDEMPOTENCY_UNITS), maxLength: 8 }), check),
      { numRuns: 3000 },
    );
    for (const value of [
      "a".repeat(255),
      "a".repeat(256),
      `"${"a".repeat(255)}"`,
      `"${"a".repeat(256)}"`,
      '""',
      '"',
      '"a',
    ])
      check(value);
  });

  it("a path integer (petId) and a page limit: digits without leading zeros", () => {
    const id = positiveIdString("petId", "");
    const limit = pageLimit("");
    const digits = fc.string({
      unit: fc.constantFrom("0", "1", "5", "9", "-", "+", ".", "e", " "),
      maxLength: 5,
    });
    fc.assert(
      fc.property(digits, (value) => {
        expect(compiled(INTEGER_PATTERN).test(value), value).toBe(id.safeParse(value).success);
        expect(compiled(PAGE_LIMIT_PATTERN).test(value), value).toBe(
          limit.safeParse(value).success && value !== "",
        );
      }),
      { numRuns: 2000 },
    );
  });
});

describe("the documents state the rules", () => {
  type Schema = Record<string, unknown> & { properties?: Record<string, Schema> };
  type Parameter = { name: string; in: string; schema: Schema };
  type Doc = {
    paths: Record<string, Record<string, { operationId: string; parameters?: Parameter[] }>>;
    components: { schemas: Record<string, Schema> };
  };
  const documentOf = async (path: string) => (await (await call(path)).json()) as Doc;
  const parameter = (doc: Doc, path: string, method: string, name: string) =>
    doc.paths[path]![method]!.parameters!.find((p) => p.name === name)!.schema;

  it("public: the name pattern, the Idempotency-Key pattern, integers without leading zeros, no unknown fields", async () => {
    const doc = await documentOf("/v1/openapi.json");
    const newPet = doc.components.schemas.NewPet!;
    expect(newPet.properties!.name!.pattern).toBe(DISPLAY_NAME_PATTERN);
    expect(newPet.additionalProperties).toBe(false);
    expect(parameter(doc, "/pets", "post", "idempotency-key").pattern).toBe(
      IDEMPOTENCY_KEY_PATTERN,
    );
    expect(parameter(doc, "/pets/{petId}", "get", "petId").pattern).toBe(INTEGER_PATTERN);
    expect(parameter(doc, "/pets", "get", "limit").pattern).toBe(PAGE_LIMIT_PATTERN);
  });

  it("admin: limits only and always on enterprise keys, a PATCH names a field, no unknown fields", async () => {
    const { components } = await documentOf("/admin/v1/openapi.json");
    const create = components.schemas.CreateKey!;
    expect(create.additionalProperties).toBe(false);
    expect(create.oneOf).toEqual([
      expect.objectContaining({
        properties: {
          plan: { const: "enterprise" },
          limits: { $ref: "#/components/schemas/Limits" },
        },
        required: ["plan", "limits"],
      }),
      expect.objectContaining({
        properties: { plan: { enum: ["free", "pro", "business"] }, limits: false },
        required: ["plan"],
      }),
    ]);
    const update = components.schemas.UpdateKey!;
    expect(update.minProperties).toBe(1);
    expect(update.additionalProperties).toBe(false);
    expect(update.not).toEqual({
      properties: {
        plan: { enum: ["free", "pro", "business"] },
        limits: { $ref: "#/components/schemas/Limits" },
      },
      required: ["plan", "limits"],
    });
    for (const name of ["RollKey"])
      expect(components.schemas[name]!.additionalProperties).toBe(false);
  });
});
