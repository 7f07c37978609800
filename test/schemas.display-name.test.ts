import { describe, expect, it } from "vitest";
import { DisplayNameSchema } from "../src/schemas/common";
import { ADMIN, auth, expectError, issueKey, patchKey, petCount, postJson } from "./helpers";

/** Each refused name, with the words its 400 message must contain (the rule it broke). */
const REFUSED: Array<[string, string, RegExp]> = [
  ["C1 control U+0085 (NEL)", "Rex\u0085", /control characters/],
  ["C1 control U+0080", "\u0080Rex", /control characters/],
  ["C1 control U+009F", "R\u009fex", /control characters/],
  ["DEL U+007F", "Rex\u007f", /control characters/],
  ["bidi override U+202E (RLO)", "Rex\u202egnp.exe", /bidirectional/],
  ["bidi embedding U+202A (LRE)", "\u202aRex", /bidirectional/],
  ["bidi isolate U+2066 (LRI)", "Rex\u2066x\u2069", /bidirectional/],
  ["bidi pop isolate U+2069 (PDI)", "Rex\u2069", /bidirectional/],
  ["line separator U+2028", "Rex\u2028Max", /line or paragraph separators/],
  ["paragraph separator U+2029", "Rex\u2029Max", /line or paragraph separators/],
  ["a lone U+200B", "\u200b", /visible character/],
  ["only ZWJ", "\u200d\u200d", /visible character/],
  ["U+2060 and U+FEFF inside spaces", " \u2060\ufeff\u2060 ", /visible character/],
  ["Hangul filler U+3164", "\u3164", /visible character/],
  ["blank Braille pattern U+2800", "\u2800\u2800", /visible character/],
  ["a lone combining mark", "\u0301", /visible character/],
  ["variation selector only", "\ufe0f", /visible character/],
];

/** Names that must stay valid, with what they exercise. */
const ACCEPTED: Array<[string, string]> = [
  ["ZWJ family emoji", "👨‍👩‍👧‍👦"],
  ["ZWJ profession emoji with skin tone", "🧑🏽‍🚀"],
  ["subdivision flag (tag characters)", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"],
  ["keycap sequence", "1️⃣"],
  ["Arabic (right-to-left, no override)", "قطة"],
  ["Hebrew with a Latin word", "כלב Rex"],
  ["combining accent on a letter", "Zoe\u0301"],
  ["Latin-1 letters", "Zoë Ñandú"],
  ["a soft hyphen inside a word", "Rex\u00adford"],
  ["ZWNJ inside Persian", "می\u200cخواهم"],
];

describe("DisplayNameSchema refuses invisible and direction-changing characters", () => {
  for (const [what, name, rule] of REFUSED) {
    it(`refuses ${what}, naming the rule`, () => {
      const result = DisplayNameSchema.safeParse(name);
      expect(result.success).toBe(false);
      expect(result.error?.issues.map((i) => i.message).join("; ")).toMatch(rule);
    });
  }
  for (const [what, name] of ACCEPTED) {
    it(`accepts ${what}`, () => {
      expect(DisplayNameSchema.safeParse(name)).toEqual({ success: true, data: name });
    });
  }
});

describe("names over HTTP", () => {
  it("POST /v1/pets with a bidi override → 400 naming the field and the rule; nothing stored", async () => {
    const { key } = await issueKey();
    const before = await petCount();
    const res = await postJson("/v1/pets", { name: "Rex\u202e", categoryId: 1 }, auth(key));
    const body = await expectError(res, 400, "invalid_request");
    expect(body.message).toMatch(/^name: must not contain bidirectional/);
    expect(await petCount()).toBe(before);
  });

  it("POST /v1/pets with a lone U+200B → 400; with a ZWJ emoji sequence → 201 as sent", async () => {
    const { key } = await issueKey();
    const invisible = await postJson("/v1/pets", { name: "\u200b", categoryId: 1 }, auth(key));
    expect((await expectError(invisible, 400, "invalid_request")).message).toMatch(/visible/);
    const emoji = await postJson("/v1/pets", { name: "🐕‍🦺", categoryId: 1 }, auth(key));
    expect(emoji.status).toBe(201);
    expect(((await emoji.json()) as { name: string }).name).toBe("🐕‍🦺");
  });

  it("key names follow the same rules (POST and PATCH /admin/v1/keys)", async () => {
    const post = await postJson("/admin/v1/keys", { name: "acme\u0085", plan: "free" }, ADMIN);
    expect((await expectError(post, 400, "invalid_request")).message).toMatch(/control/);
    const { id } = await issueKey("free");
    const res = await patchKey(id, { name: "\u2066acme\u2069" });
    expect((await expectError(res, 400, "invalid_request")).message).toMatch(/bidirectional/);
  });
});
