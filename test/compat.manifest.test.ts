/// <reference types="vite/client" />
// compat/release.json says what this release reads and writes; the rollback scripts trust it to
// refuse a rollback that would turn quotas off or refuse keys. Each of its entries is checked
// here against the code that reads or writes that format, so a change to a format, a migration
// list or a schema fails until the record says so too.
import { describe, expect, it } from "vitest";
import { generateApiKey, keyShapeOf, newKeyId } from "../src/auth/key-format";
import { fromBase64Url, toBase64Url } from "../src/lib/encoding";
import { signBookmark, verifiedBookmarkOrThrow } from "../src/middleware/d1-session";
import { AUTH_SHIELD_MIGRATIONS } from "../src/objects/auth-shield";
import { OBJECT_SCHEMAS } from "../src/objects/object-schemas";
import { QUOTA_LIMITER_MIGRATIONS } from "../src/objects/quota-limiter-schema";
import { decodeKeyCursorOrThrow, encodeSignedCursor } from "../src/routes/admin/key-views";
import { decodeCursorOrThrow, encodeCursor } from "../src/routes/pets/cursor";
import { PREVIOUS_RELEASE } from "./fixtures/previous-release/schemas";

interface ReadsWrites {
  reads: string[];
  writes: string[];
}
interface Manifest {
  previousRelease?: string;
  commit?: string;
  keys: ReadsWrites;
  cursors: ReadsWrites;
  bookmarks: ReadsWrites;
  d1: { migrations: string[]; contract: string[] };
  objects: Record<string, { writes: number; readsThrough: number }>;
  formats?: Record<string, string>;
}

// Read at transform time by Vite.
const files = import.meta.glob<string>(
  ["../compat/release.json", "../compat/before-manifest/*.json"],
  {
    query: "?raw",
    import: "default",
    eager: true,
  },
);
const migrationFiles = Object.keys(
  import.meta.glob("../migrations/*.sql", { query: "?raw", import: "default", eager: true }),
)
  .map((f) => f.split("/").pop())
  .sort();

const manifest = JSON.parse(files["../compat/release.json"] ?? "null") as Manifest;
const fixtures = Object.entries(files)
  .filter(([name]) => name.includes("/before-manifest/"))
  .map(([name, text]) => ({ name, record: JSON.parse(text) as Manifest }));

const SECRET = "compat-test-secret";
const BOOKMARK = "00000001-00000002-00004fb5-7e9c1d7e3b1f";

describe("compat/release.json: what this release reads and writes", () => {
  it("names the previous release by its full commit id", () => {
    expect(manifest.previousRelease).toMatch(/^[0-9a-f]{40}$/);
  });

  it("names the release whose schemas and statements test/fixtures/previous-release/ holds", () => {
    // The rollback tests (objects.schema-compat, the quota model's Rollback) run that release's
    // code: a new previous release means new fixtures, copied from it.
    expect(PREVIOUS_RELEASE).toBe(manifest.previousRelease);
  });

  it("D1: the migrations are exactly the files in migrations/", () => {
    expect(manifest.d1.migrations).toEqual(migrationFiles);
    for (const m of manifest.d1.contract) expect(manifest.d1.migrations).toContain(m);
  });

  it("objects: the schema version each object's code migrates to, and opens", () => {
    expect(manifest.objects).toEqual(OBJECT_SCHEMAS);
    expect(manifest.objects.QuotaLimiter?.writes).toBe(QUOTA_LIMITER_MIGRATIONS.length);
    expect(manifest.objects.AuthShield?.writes).toBe(AUTH_SHIELD_MIGRATIONS.length);
    // The location holder has no SQLite schema: what it keeps is one key-value entry (compat/README.md).
    expect(manifest.objects.QuotaHolder).toEqual({ writes: 0, readsThrough: 0 });
    for (const object of Object.values(manifest.objects))
      expect(object.readsThrough).toBeGreaterThanOrEqual(object.writes);
  });

  it("keys: a new key is routed; plain and routed keys are read", async () => {
    expect(manifest.keys).toEqual({ reads: ["plain", "routed"], writes: ["routed"] });
    const { key } = await generateApiKey("staging", newKeyId(), SECRET);
    expect(keyShapeOf(key)?.keyId).toMatch(/^key_/);
    const plain = `pet_test_${"a".repeat(43)}`;
    expect(keyShapeOf(plain)).toEqual({ keyId: null, tag: null });
  });

  it("cursors: pets-v1 is `id:status:bookmark` and its 16-byte tag; admin-v2 a JSON array and its tag (written), admin-v1 the array unsigned (still read)", async () => {
    expect(manifest.cursors).toEqual({
      reads: ["pets-v1", "admin-v1", "admin-v2"],
      writes: ["pets-v1", "admin-v2"],
    });
    const pets = await encodeCursor(SECRET, 42, "available", BOOKMARK);
    const bytes = fromBase64Url(pets);
    expect(new TextDecoder().decode(bytes.slice(0, bytes.length - 16))).toBe(
      `42:available:${BOOKMARK}`,
    );
    expect(await decodeCursorOrThrow([SECRET], pets, "available")).toEqual({
      afterId: 42,
      bookmark: BOOKMARK,
    });
    // admin-v1, as the release before issued it: base64url of the JSON array.
    const admin = toBase64Url(new TextEncoder().encode('[7,"key_x"]'));
    const secrets = () => [SECRET];
    expect(await decodeKeyCursorOrThrow(secrets, "keys", admin)).toEqual({
      createdAt: 7,
      id: "key_x",
    });
    const signed = fromBase64Url(await encodeSignedCursor(SECRET, "keys", [7, "key_x"]));
    expect(new TextDecoder().decode(signed.slice(0, signed.length - 16))).toBe('[7,"key_x"]');
    expect(
      await decodeKeyCursorOrThrow(
        secrets,
        "keys",
        await encodeSignedCursor(SECRET, "keys", [7, "key_x"]),
      ),
    ).toEqual({ createdAt: 7, id: "key_x" });
  });

  it("bookmarks: signed-v1 is `<bookmark>.<22 base64url characters>`", async () => {
    expect(manifest.bookmarks).toEqual({ reads: ["signed-v1"], writes: ["signed-v1"] });
    const signed = await signBookmark(SECRET, BOOKMARK);
    expect(signed).toMatch(new RegExp(`^${BOOKMARK}\\.[A-Za-z0-9_-]{22}$`));
    expect(await verifiedBookmarkOrThrow([SECRET], signed)).toBe(BOOKMARK);
  });

  it("every format named is described, and the records before it have the same shape", () => {
    const named = [manifest, ...fixtures.map((f) => f.record)].flatMap((m) =>
      [m.keys, m.cursors, m.bookmarks].flatMap((rw) => [...rw.reads, ...rw.writes]),
    );
    for (const format of named) expect(manifest.formats?.[format], format).toBeTruthy();
    expect(fixtures.length).toBeGreaterThanOrEqual(2);
    for (const { name, record } of fixtures) {
      expect(record.commit, name).toMatch(/^[0-9a-f]{40}$/);
      expect(name).toContain(record.commit?.slice(0, 7));
      expect(Object.keys(record).sort(), name).toEqual(
        ["bookmarks", "commit", "cursors", "d1", "derivedFrom", "keys", "objects"].sort(),
      );
    }
  });
});
