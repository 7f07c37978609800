// The served OpenAPI documents against the client's committed snapshot and generated types, and
// `redocly lint` (recommended-strict + descriptions) over the public and the admin document.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import {
  DOCUMENTS,
  fetchDocument,
  GENERATED_TYPES,
  generateTypes,
  lintDocument,
  readSnapshot,
} from "../scripts/lib/openapi.mjs";
import { localApiForTests } from "./helpers.mjs";

describe("OpenAPI documents", () => {
  const server = localApiForTests();

  it("the served public document is the client's snapshot (else: npm run openapi -- update)", async () => {
    const served = await fetchDocument(server.api.url, DOCUMENTS[0]);
    assert.deepEqual(served, readSnapshot());
  });

  it("the client's types are what openapi-typescript generates from the served document", async () => {
    const served = await fetchDocument(server.api.url, DOCUMENTS[0]);
    const types = await generateTypes(served);
    assert.equal(types, readFileSync(GENERATED_TYPES, "utf8"));
    assert.doesNotMatch(types, /& unknown/);
    for (const op of ["listPets", "createPet", "getPet"])
      assert.match(types, new RegExp(`${op}: \\{`));
  });

  it("lists this environment's server, a license, a contact and tags", async () => {
    const doc = await fetchDocument(server.api.url, DOCUMENTS[0]);
    assert.deepEqual(
      doc.servers.map((s) => s.url),
      ["/v1"], // PUBLIC_ORIGIN is "" in the top-level (local) wrangler.toml vars: relative
    );
    assert.equal(doc.info.license.identifier, "MIT");
    assert.ok(doc.info.contact.name);
    assert.deepEqual(
      doc.tags.map((t) => t.name),
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
