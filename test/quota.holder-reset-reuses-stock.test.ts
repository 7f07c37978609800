// A location holder forwards a request and is granted a stock with it; it admits another request
// from that stock; then it is reset (a deploy, a crash, an eviction) before the first request's
// answer reached its isolate, which asks the same admission id again (a `.retryable` error is
// retried once, on a fresh stub: the holder started again). The key's object answers the id as it
// did, with the stock while it is out: the holder, having lost what it used of the stock, must not
// admit from that stock's permits a second time. docs/quotas.md, "Exact": every permit, at every
// tier, was counted by the key's object before it was used to admit; no minute admits past its
// limit.
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { type HolderAnswer, holderName } from "../src/objects/quota-holder";
import { backgroundWork } from "./background-work";
import { mockClock, policyWith, T0 } from "./helpers";

const POLICY = policyWith(60, 1_000);
const time = mockClock(T0);
const { passTime, passTo, evictHolder } = backgroundWork(time);

const allowed = (a: HolderAnswer) => a.reached && a.decision.outcome === "allowed";

it("a holder reset after admitting from the stock its forwarded request brought: no minute admits past its limit", async () => {
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  const keyId = "holder_reset_reuses_stock";
  const holder = env.QUOTA_HOLDER.getByName(holderName(keyId, "AMS"));
  // The key's first request: forwarded, and granted a stock for the rest of the minute.
  await passTo(T0 + 1_000);
  const first = await holder.admit(keyId, POLICY, null, "first");
  expect(allowed(first), "admitted").toBe(true);
  expect(first.reached && first.fromStock, "forwarded to the key's object").toBe(false);
  await passTime();
  // Another isolate's request, answered from that stock.
  await passTo(T0 + 1_500);
  const second = await holder.admit(keyId, POLICY, null, "second");
  expect(second.reached && second.fromStock, "from the stock").toBe(true);
  // The holder is reset before the first request's answer reached its isolate, which asks again.
  await evictHolder(keyId);
  await passTo(T0 + 2_000);
  const again = await holder.admit(keyId, POLICY, null, "first");
  expect(allowed(again), "the same request, asked again").toBe(true);
  await passTime();
  // The key's requests go on in that minute until refused: each a request of its own.
  let admitted = 2; // "first" and "second"
  for (let i = 0; i < 75; i++) {
    await passTo(T0 + 3_000 + i * 300);
    if (allowed(await holder.admit(keyId, POLICY, null, `r-${i}`))) admitted++;
  }
  expect(admitted, "requests admitted in the minute, of a limit of 60").toBeLessThanOrEqual(
    POLICY.perMinute,
  );
});
