/// <reference types="vite/client" />
// The plans are defined once (src/quota/plans.ts); what else names them is checked against it
// here: the database's CHECK, the keys CLI's help and the plan tables in the docs. (The request
// schemas and the OpenAPI documents are built from PLANS; the soak takes each key's limits from
// the admin API.)
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { PLAN_LIMITS, PLANS } from "../src/quota/plans";

// Read at transform time by Vite.
const cli = import.meta.glob<string>("../scripts/keys.mjs", {
  query: "?raw",
  import: "default",
  eager: true,
});
const docs = import.meta.glob<string>(["../README.md", "../docs/*.md"], {
  query: "?raw",
  import: "default",
  eager: true,
});

const number = (s: string) => Number(s.replaceAll(",", ""));

describe("plans, defined once in quota/plans.ts", () => {
  it("the api_keys table accepts exactly the plans (its CHECK lists them)", async () => {
    const row = await env.DB.prepare(
      "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'api_keys'",
    ).first<{ sql: string }>();
    const list = row?.sql.match(/plan\s+TEXT\s+NOT NULL\s+CHECK\s*\(plan IN \(([^)]*)\)\)/);
    expect(list, "the CHECK on api_keys.plan").toBeTruthy();
    const inCheck = [...list![1]!.matchAll(/'([^']+)'/g)].map((m) => m[1]);
    expect(inCheck).toEqual([...PLANS]);
  });

  it("the keys CLI's help lists the plans", () => {
    const source = Object.values(cli)[0]!;
    expect(source).toContain(`--plan ${PLANS.join("|")}`);
  });

  it("every plan table in the docs has each plan's limits", () => {
    let tables = 0;
    for (const [file, text] of Object.entries(docs)) {
      const rows = new Map(
        [
          ...text.matchAll(
            /^\| (\w+) \| ([\d,]+|the key's own `perMinute`) \| ([\d,]+|the key's own `perDay`) \|$/gm,
          ),
        ].map((m) => [m[1]!, [m[2]!, m[3]!]] as const),
      );
      if (!rows.size) continue;
      tables++;
      expect([...rows.keys()], file).toEqual([...PLANS]);
      for (const [plan, limits] of Object.entries(PLAN_LIMITS))
        expect(rows.get(plan)?.map(number), `${file}: ${plan}`).toEqual([
          limits.perMinute,
          limits.perDay,
        ]);
    }
    expect(tables, "plan tables found in README.md and docs/").toBeGreaterThan(0);
  });
});
