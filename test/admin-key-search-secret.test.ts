// The key list's `q` finds a key by the start of its secret, up to the secret's shown prefix (all
// that is matched): more of a secret, up to a whole key, is refused with a 400 that says what to
// send, because a request's URL is what request logs keep. The console and the keys CLI send only
// the shown prefix of whatever was pasted.
import { describe, expect, it } from "vitest";
import cli from "../scripts/keys.mjs?raw";
import { SHOWN_PREFIX_LENGTH } from "../src/schemas/keys";
import { ADMIN, call, expectError, issueKey } from "./helpers";

const RULE = `q: must not hold more of a secret than its shown prefix (its first ${SHOWN_PREFIX_LENGTH} characters, pet_test_ and 4): only those are matched, and the rest would be kept in request logs with the URL`;

const search = (q: string) =>
  call(`/admin/v1/keys?limit=100&q=${encodeURIComponent(q)}`, { headers: ADMIN });

describe("GET /admin/v1/keys?q= with a secret", () => {
  it("a whole key, or any more of it than the shown prefix → 400 naming the safe search", async () => {
    const { key } = await issueKey("pro", undefined, { name: "search-whole" });
    for (const q of [key, key.slice(0, 43 + 9), key.slice(0, SHOWN_PREFIX_LENGTH + 1)]) {
      const error = await expectError(await search(q), 400, "invalid_request");
      expect(error.message).toBe(RULE);
      expect(error.message).not.toContain(key.slice(9, 20));
    }
  });

  it("its shown prefix (what the key list shows) or less finds the key; names stay searchable", async () => {
    const { id, key, prefix } = (await issueKey("pro", undefined, {
      name: "search-prefix",
    })) as Awaited<ReturnType<typeof issueKey>> & { prefix: string };
    expect(prefix).toBe(key.slice(0, SHOWN_PREFIX_LENGTH));
    for (const q of [prefix, key.slice(0, SHOWN_PREFIX_LENGTH - 2)]) {
      const res = await search(q);
      expect(res.status).toBe(200);
      const ids = ((await res.json()) as { data: { id: string }[] }).data.map((k) => k.id);
      expect(ids, q).toContain(id);
    }
    const byName = await search("search-prefix-and-a-long-name-past-thirteen");
    expect(byName.status).toBe(200);
  });
});

describe("npm run keys -- list --q: a pasted secret is sent as its shown prefix only", () => {
  it("the CLI's shown prefix length is the API's", () => {
    expect(/^const SHOWN_PREFIX_LENGTH = (\d+);$/m.exec(cli)?.[1]).toBe(
      String(SHOWN_PREFIX_LENGTH),
    );
    expect(cli).toContain("q: searchedFor(values.q)");
  });
});

describe("the console's search field carries the shown prefix length it trims a secret to", () => {
  it("data-shown-prefix on the q input", async () => {
    const res = await call("/admin/keys", { headers: { Accept: "text/html" } });
    const html = await res.text();
    expect(html).toMatch(
      new RegExp(`<input name="q"[^>]*data-shown-prefix="${SHOWN_PREFIX_LENGTH}"`),
    );
  });
});
