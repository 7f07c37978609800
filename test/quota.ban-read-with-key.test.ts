// A ban reaches a location holder that never forwards (a key calling once a minute there, answered
// from standing permits) through its copy of the key: the key's object records the ban in D1
// (`banned_until`) from its alarm, and a holder's copy, read from D1 at most 30 s before it
// decides a request, or once past that (docs/quotas.md), carries it. Here the ban's push to the
// holder is lost: after the ban is in D1, at most one request there is admitted on the older copy,
// and every one after it is refused key_banned until the ban ends.
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { forgetKey } from "../src/auth/key-cache";
import { findKeyByHash, policyOf } from "../src/db/keys";
import { MINUTE_MS } from "../src/lib/clock";
import { sha256Hex } from "../src/lib/crypto";
import { QuotaHolder } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { auth, BASE, banKeyAtItsObject, callWith, issueKey, mockClock, T0 } from "./helpers";

const time = mockClock(T0);
const { passTime, passTo, uncounted } = backgroundWork(time);

let seq = 0;

/** One request in AMS from a cold isolate (its holder authenticates and decides): its outcome. */
async function requestInAms(keyId: string, token: string): Promise<string> {
  forgetKey(keyId);
  const request = new Request(`${BASE}/v1/pets?limit=1`, {
    headers: auth(token, { "CF-Connecting-IP": `198.51.100.${++seq}` }),
    cf: { colo: "AMS" },
  } as RequestInit);
  const res = await callWith({}, request);
  const body = (await res.json()) as { code?: string };
  await passTime();
  return res.status === 200 ? "allowed" : (body.code ?? String(res.status));
}

it("a holder answering from standing permits, the ban's push lost, refuses the key once its copy read from D1 carries the ban", async () => {
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  const { id, key } = await issueKey("free");
  // A key calling once a minute in AMS: standing permits after its first requests.
  for (let m = 0; m < 3; m++) {
    await passTo(T0 + m * MINUTE_MS + 5_000);
    expect(await requestInAms(id, key)).toBe("allowed");
  }
  // The ban's push to the holder is lost.
  vi.spyOn(QuotaHolder.prototype, "keyChanged").mockRejectedValue(new Error("push lost"));
  // Elsewhere, the key keeps sending past its limit this minute, and is banned (15 minutes).
  await passTo(T0 + 3 * MINUTE_MS + 2_000);
  const match = await findKeyByHash(env.DB, await sha256Hex(key));
  const policy = policyOf(match!.record);
  await banKeyAtItsObject(id, policy);
  await passTime();
  // The object's alarm records the ban in D1.
  await runDurableObjectAlarm(uncounted(env.QUOTA, id));
  expect((await findKeyByHash(env.DB, await sha256Hex(key)))?.record.bannedUntil).toBeGreaterThan(
    time.now,
  );
  // The key's requests in AMS, once a minute, during the ban.
  const during: string[] = [];
  for (let m = 4; m <= 8; m++) {
    await passTo(T0 + m * MINUTE_MS + 5_000);
    during.push(await requestInAms(id, key));
  }
  expect(
    during.slice(1),
    `after at most one on the older copy (all: ${during.join(", ")})`,
  ).toEqual(["key_banned", "key_banned", "key_banned", "key_banned"]);
});
