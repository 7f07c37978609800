// @ts-check
// The served OpenAPI documents against the client's committed snapshot and generated types,
// `redocly lint` (recommended-strict + descriptions) over the public and the admin document, and
// every answer of the API checked against them by Prism's validator (e2e/openapi-validation.mjs).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { issueKey } from "../scripts/lib/local-server.mjs";
import {
  DOCUMENTS,
  fetchDocument,
  GENERATED_ADMIN_TYPES,
  GENERATED_TYPES,
  generateTypes,
  lintDocument,
  readSnapshot,
} from "../scripts/lib/openapi.mjs";
import { localApiForTests } from "./helpers.mjs";
import {
  MISCONFIGURED_VARS,
  VALIDATION_ORIGIN,
  validateEveryAnswer,
  workerAnswered,
} from "./openapi-validation.mjs";

describe("OpenAPI documents", () => {
  const server = localApiForTests({ vars: { CORS_ORIGINS: VALIDATION_ORIGIN } });
  // The same API with a setting wrong: its answers are the documents' 500s.
  const misconfigured = localApiForTests({ vars: MISCONFIGURED_VARS, isUp: workerAnswered });
  /**
   * `spec`'s document as the API serves it; it must be served.
   * @param {import("../scripts/lib/openapi.mjs").DocumentSpec} spec
   */
  const served = async (spec) => {
    const doc = await fetchDocument(server.api.url, spec);
    assert.ok(doc, `${spec.path} is served`);
    return doc;
  };

  it("the served public document is the client's snapshot (else: npm run openapi -- update)", async () => {
    assert.deepEqual(await served(DOCUMENTS[0]), readSnapshot());
  });

  it("the client's types are what openapi-typescript generates from the served document", async () => {
    const types = await generateTypes(await served(DOCUMENTS[0]));
    assert.equal(types, readFileSync(GENERATED_TYPES, "utf8"));
    assert.doesNotMatch(types, /& unknown/);
    for (const op of ["listPets", "createPet", "getPet"])
      assert.match(types, new RegExp(`${op}: \\{`));
  });

  it("the admin types are what openapi-typescript generates from the served admin document", async () => {
    assert.equal(
      await generateTypes(await served(DOCUMENTS[1])),
      readFileSync(GENERATED_ADMIN_TYPES, "utf8"),
    );
  });

  it("a client generated from both documents (openapi-typescript + openapi-fetch) calls every operation", async () => {
    const { callEveryOperation } = await import("./typed-client/calls.ts");
    const { key } = await issueKey(server.api, { name: "typed client", plan: "pro" });
    const log = await callEveryOperation(server.api.url, {
      apiKey: key,
      adminToken: server.api.adminToken,
    });
    const answered = new Set(log.map((line) => line.split(" ").slice(0, 3).join(" ")));
    const expected = [];
    for (const spec of DOCUMENTS) {
      const doc = await served(spec);
      for (const [path, methods] of Object.entries(doc.paths ?? {}))
        for (const method of Object.keys(methods))
          expected.push(`${method.toUpperCase()} ${spec.name} ${path}`);
    }
    assert.deepEqual(
      expected.filter((call) => !answered.has(call)),
      [],
      "operations the generated client did not call",
    );
    // Each call got the answer it asked for: a success, or the 405 an OPTIONS gets.
    const unexpected = log.filter((line) => {
      const [method, , , status] = line.split(" ");
      return method === "OPTIONS" ? status !== "405" : !/^2|^304$/.test(status);
    });
    assert.deepEqual(unexpected, [], "calls that did not get the answer they asked for");
  });

  // Last of the tests that call the API: it uses up this client's failed-authentication window.
  it("every answer is one the documents describe (Prism's validator), every declared status is produced", async () => {
    const { problems, outside, missing } = await validateEveryAnswer(server.api, misconfigured.api);
    assert.deepEqual(problems, [], "answers the documents do not describe");
    assert.deepEqual(outside, [], "Prism made no request outside this machine");
    assert.deepEqual(missing, [], "declared statuses no request produced");
  });

  it("lists this environment's server, a license, a contact and tags", async () => {
    const doc = await served(DOCUMENTS[0]);
    assert.deepEqual(
      doc.servers?.map((s) => s.url),
      ["/v1"], // PUBLIC_ORIGIN is "" in the top-level (local) wrangler.toml vars: relative
    );
    assert.equal(doc.info.license?.identifier, "MIT");
    assert.ok(doc.info.contact?.name);
    assert.deepEqual(
      doc.tags?.map((t) => t.name),
      ["Pets", "Usage", "Document"],
    );
    const headerRefs = JSON.stringify(doc.paths).match(/#\/components\/headers\//g) ?? [];
    assert.ok(headerRefs.length > 50, "response headers are references");
    assert.doesNotMatch(JSON.stringify(doc.paths), /"X-RateLimit-Limit":\{"description"/);
  });

  for (const spec of DOCUMENTS) {
    it(`${spec.name} document: redocly lint has 0 errors and 0 warnings`, async (t) => {
      const doc = await fetchDocument(server.api.url, spec, { adminToken: server.api.adminToken });
      if (!doc) return t.skip(`${spec.path} answers 404: not served yet`);
      const { totals, problems } = lintDocument(doc, spec.name);
      assert.deepEqual(
        problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`),
        [],
      );
      assert.equal(totals.errors, 0);
      assert.equal(totals.warnings, 0);
    });
  }
});
