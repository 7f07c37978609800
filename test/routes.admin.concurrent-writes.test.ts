// Many admin writes to one record at once: every one lands (none answers 503), the record ends
// with the last write of each field, and the audit trail is one unbroken chain: each entry's
// `before` is the `after` of the entry before it that touched the same field.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { WRITE_ATTEMPTS } from "../src/routes/admin/write-while-unchanged";
import { ADMIN, call, callWith, issueKey, postJson } from "./helpers";

const URL_OK = "https://hooks.example.com/animal-store";

/** How many writers each test sends at once: the count the docs promise all land. */
const WRITERS = WRITE_ATTEMPTS;

/**
 * How long a query's answer takes to come back from D1, and a write to reach it: in the tests' D1
 * a query takes well under a millisecond, in a deployment one to tens of milliseconds each way,
 * which is what leaves room between reading a record and writing it for others' writes.
 */
const ROUND_TRIP_MS = 5;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * env.DB, with a one-record read (a key's or an endpoint's) answering ROUND_TRIP_MS after it ran
 * and a batch running ROUND_TRIP_MS after it was sent, as a deployed D1 would.
 */
const distantDb = new Proxy(env.DB, {
  get: (target, prop) => {
    if (prop === "batch")
      return async (statements: D1PreparedStatement[]) => {
        await sleep(ROUND_TRIP_MS);
        return target.batch(statements);
      };
    if (prop !== "prepare") return Reflect.get(target, prop).bind(target);
    return (sql: string) => {
      const statement = target.prepare(sql);
      if (!/^SELECT .* FROM (api_keys|webhook_endpoints) WHERE id = \?1$/s.test(sql))
        return statement;
      return {
        bind: (...values: unknown[]) => ({
          first: async () => {
            const row = await statement.bind(...values).first();
            await sleep(ROUND_TRIP_MS);
            return row;
          },
        }),
      };
    };
  },
});

/** An admin request with a JSON body, served with distantDb. */
const send = (path: string, method: string, body: unknown) =>
  callWith({ DB: distantDb }, path, {
    method,
    headers: { ...ADMIN, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

type Change = { before: unknown; after: unknown };
type Entry = { id: number; action: string; keyId: string; changes: Record<string, Change> };

/** The audit entries of record `id`, oldest first. */
async function auditOldestFirst(id: string): Promise<Entry[]> {
  const entries: Entry[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `&cursor=${cursor}` : "";
    const res = await call(`/admin/v1/audit?limit=100${query}`, { headers: ADMIN });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: Entry[]; nextCursor: string | null };
    entries.push(...page.data.filter((e) => e.keyId === id));
    cursor = page.nextCursor;
  } while (cursor);
  return entries.sort((a, b) => a.id - b.id);
}

/**
 * Checks that every entry's `before` of a field is the `after` of the previous entry that changed
 * it (the first one's `before` is `initial`'s), and returns each field's last `after`.
 */
function lastValuesOfUnbrokenChain(
  entries: Entry[],
  initial: Record<string, unknown>,
): Record<string, unknown> {
  const last: Record<string, unknown> = { ...initial };
  for (const entry of entries)
    for (const [field, change] of Object.entries(entry.changes)) {
      if (field in last)
        expect(change.before, `${entry.action} #${entry.id} ${field}`).toEqual(last[field]);
      last[field] = change.after;
    }
  return last;
}

describe(`${WRITERS} admin writes to one key at once`, () => {
  it("all land: PATCHes of name, ownerId and meta, and rolls; the record and the audit chain hold every one", async () => {
    const k = await issueKey("pro");
    const before = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      name: string;
      prefix: string;
    };
    const rolls = 4;
    const patches = Array.from({ length: WRITERS - rolls }, (_, i) =>
      i % 3 === 0
        ? { name: `name ${i}` }
        : i % 3 === 1
          ? { ownerId: `acct_${i}` }
          : { meta: { i } },
    );
    const answers = await Promise.all([
      ...patches.map((body) => send(`/admin/v1/keys/${k.id}`, "PATCH", body)),
      ...Array.from({ length: rolls }, () =>
        send(`/admin/v1/keys/${k.id}/roll`, "POST", { gracePeriodSeconds: 60 }),
      ),
    ]);
    const statuses = await Promise.all(
      answers.map(async (res) => `${res.status}${res.status >= 300 ? ` ${await res.text()}` : ""}`),
    );
    expect(statuses).toEqual([...patches.map(() => "200"), ...Array(rolls).fill("201")]);

    const entries = await auditOldestFirst(k.id);
    expect(entries.map((e) => e.action).sort()).toEqual(
      ["create", ...patches.map(() => "update"), ...Array(rolls).fill("roll")].sort(),
    );
    const created = entries[0]!;
    expect(created.action).toBe("create");
    const last = lastValuesOfUnbrokenChain(entries.slice(1), {
      name: before.name,
      ownerId: null,
      meta: null,
      prefix: before.prefix,
    });
    const detail = (await (await call(`/admin/v1/keys/${k.id}`, { headers: ADMIN })).json()) as {
      name: string;
      ownerId: string | null;
      meta: unknown;
      prefix: string;
    };
    expect(detail).toMatchObject({
      name: last.name,
      ownerId: last.ownerId,
      meta: last.meta,
      prefix: last.prefix,
    });
    // Every value sent was written at some point of the chain, none lost.
    const written = entries.flatMap((e) =>
      Object.values(e.changes).map((c) => JSON.stringify(c.after)),
    );
    for (const body of patches) expect(written).toContain(JSON.stringify(Object.values(body)[0]));
  });
});

describe(`${WRITERS} admin writes to one webhook endpoint at once`, () => {
  it("all land: PATCHes of the description, secret rolls and enable/disable; the audit chain is unbroken", async () => {
    const created = await postJson(
      "/admin/v1/webhooks",
      { url: URL_OK, eventTypes: ["key.banned"], description: "start" },
      ADMIN,
    );
    expect(created.status).toBe(201);
    const e = (await created.json()) as { id: string };
    const rolls = 5;
    const toggles = 5;
    const descriptions = Array.from({ length: WRITERS - rolls - toggles }, (_, i) => `change ${i}`);
    const endpoint = `/admin/v1/webhooks/${e.id}`;
    const answers = await Promise.all([
      ...descriptions.map((description) => send(endpoint, "PATCH", { description })),
      ...Array.from({ length: rolls }, () =>
        send(`${endpoint}/roll-secret`, "POST", { gracePeriodSeconds: 60 }),
      ),
      ...Array.from({ length: toggles }, (_, i) =>
        send(endpoint, "PATCH", { enabled: i % 2 === 1 }),
      ),
    ]);
    const statuses = await Promise.all(
      answers.map(async (res) => `${res.status}${res.status >= 300 ? ` ${await res.text()}` : ""}`),
    );
    expect(statuses).toEqual([
      ...descriptions.map(() => "200"),
      ...Array(rolls).fill("201"),
      ...Array(toggles).fill("200"),
    ]);

    const entries = await auditOldestFirst(e.id);
    expect(entries.filter((x) => x.action === "webhook_roll_secret")).toHaveLength(rolls);
    const descriptionChanges = entries.filter(
      (x) => x.action === "webhook_update" && "description" in x.changes,
    );
    expect(descriptionChanges).toHaveLength(descriptions.length);
    const last = lastValuesOfUnbrokenChain(
      entries.filter((x) => x.action !== "webhook_create"),
      { description: "start", disabledAt: null },
    );
    const detail = (await (
      await call(`/admin/v1/webhooks/${e.id}`, { headers: ADMIN })
    ).json()) as {
      description: string;
      disabledAt: string | null;
    };
    expect(detail.description).toBe(last.description);
    expect(detail.disabledAt).toBe(last.disabledAt);
  });
});
