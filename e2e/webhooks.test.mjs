// Usage alerts end to end, locally: `wrangler dev` with its in-memory queue, and
// `npm run webhooks:listen` as the receiver (it registers itself and verifies signatures with
// node:crypto). A tiny enterprise key crosses 80 % and 100 % of its day quota; the receiver fails
// each event's first two attempts, and every event still arrives, verified, exactly once after
// deduplication by webhook-id.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { after, describe, test } from "node:test";
import { freePort, issueKey } from "../scripts/lib/local-server.mjs";
import { localApiForTests, projectNode22, ROOT, waitForRoomInDay } from "./helpers.mjs";

// Local receivers allowed, and a fast retry schedule (1 s each) so the retries are seen.
const server = localApiForTests({
  vars: { WEBHOOK_LOCAL_RECEIVERS: "on", WEBHOOK_RETRY_DELAYS: "1,1,1,1,1,1,1" },
});

/** Starts the listener; resolves with its parsed JSON lines (growing) once it listens. */
async function listen(args) {
  const child = spawn(projectNode22(), ["scripts/webhooks-listen.mjs", ...args, "--json"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  after(() => child.kill("SIGTERM"));
  const lines = [];
  const ready = new Promise((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`webhooks:listen exited ${code}`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      const parsed = JSON.parse(line);
      if ("listening" in parsed) resolve(parsed);
      else lines.push(parsed);
    });
  });
  const started = await ready;
  return { child, lines, endpoint: started.endpoint };
}

/** Waits until `check()` holds, calling `poll` (if any) before each look. */
async function until(what, check, ms = 60_000, poll = async () => {}) {
  const end = Date.now() + ms;
  for (;;) {
    await poll();
    if (check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("webhooks, locally", () => {
  test("80 % and 100 % of a tiny enterprise key's day arrive once each, signed, after two failed attempts", async () => {
    await waitForRoomInDay(120);
    const { url, adminToken } = server.api;
    const port = await freePort();
    const receiver = await listen([
      "--url",
      url,
      "--token",
      adminToken,
      "--port",
      String(port),
      "--fail",
      "2",
      "--events",
      "quota.day.warning,quota.day.exhausted",
    ]);
    assert.match(receiver.endpoint, /^whe_/);
    const key = await issueKey(server.api, {
      name: "tiny",
      plan: "enterprise",
      limits: { perMinute: 100, perDay: 5 },
    });
    for (let i = 0; i < 7; i++)
      await fetch(`${url}/v1/pets`, { headers: { Authorization: `Bearer ${key.key}` } });
    const accepted = () => receiver.lines.filter((l) => l.answered === 204);
    await until("both events accepted", () => accepted().length >= 2);
    await new Promise((r) => setTimeout(r, 3000)); // anything more would arrive by now
    const ours = receiver.lines.filter((l) => l.key === key.id);
    assert.ok(
      ours.every((l) => l.verified),
      "every delivery verified",
    );
    // After deduplication by webhook-id: each event exactly once.
    const unique = [...new Map(ours.map((l) => [l.id, l])).values()];
    assert.deepEqual(unique.map((l) => l.type).sort(), [
      "quota.day.exhausted",
      "quota.day.warning",
    ]);
    for (const event of unique) {
      const attempts = ours.filter((l) => l.id === event.id).map((l) => l.answered);
      assert.deepEqual(attempts, [500, 500, 204], `${event.type}: failed twice, then accepted`);
      assert.equal(event.data.limit, 5);
      assert.equal(event.data.key.plan, "enterprise");
    }
    const warning = unique.find((l) => l.type === "quota.day.warning");
    assert.equal(warning.data.threshold, 4);
    // The delivery log says the same: delivered on the third attempt.
    const res = await fetch(`${url}/admin/v1/webhooks/${receiver.endpoint}/deliveries`, {
      headers: { Authorization: `Bearer ${adminToken}` },
    });
    const log = (await res.json()).data;
    assert.equal(log.length, 2);
    for (const d of log) {
      assert.equal(d.status, "delivered");
      assert.equal(d.attempts, 3);
      assert.equal(d.responseStatus, 204);
    }
  });

  test("a delivery whose every attempt fails ends dead in the delivery log (the dead-letter queue's consumer)", async () => {
    const { url, adminToken } = server.api;
    const port = await freePort();
    const receiver = await listen([
      "--url",
      url,
      "--token",
      adminToken,
      "--port",
      String(port),
      "--fail",
      "1000",
    ]);
    const headers = { Authorization: `Bearer ${adminToken}` };
    const sent = await fetch(`${url}/admin/v1/webhooks/${receiver.endpoint}/test`, {
      method: "POST",
      headers,
    });
    assert.equal(sent.status, 202);
    const { id } = await sent.json();
    let delivery;
    await until(
      "the delivery dead",
      () => delivery?.status === "dead",
      120_000,
      async () => {
        const res = await fetch(
          `${url}/admin/v1/webhooks/${receiver.endpoint}/deliveries?status=dead`,
          { headers },
        );
        delivery = (await res.json()).data.find((d) => d.id === id);
      },
    );
    // Every attempt of the schedule was made (the listener answered 500 to each), then none.
    assert.equal(delivery.attempts, 8);
    assert.equal(delivery.nextAttemptAt, null);
    const attempts = receiver.lines.filter((l) => l.id === delivery.eventId);
    assert.deepEqual(
      attempts.map((l) => l.answered),
      Array(8).fill(500),
    );
  });
});
