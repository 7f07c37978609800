// @ts-check
// What workerd does with a Durable Object alarm set by one release when the release serving
// after it (a rollback) has no alarm() handler: this release's QuotaHolder sets an alarm to hand
// its standing permits back after their last minute, and the release before's QuotaHolder has no
// alarm() (docs/operations.md, "Rolling back"). Two Workers of one name share one state
// directory under `wrangler dev`, in turn, as production switches versions over one set of
// objects: the first's class sets an alarm and writes to its storage, then the second (the same
// class name, no alarm()) serves when the alarm comes due. The alarm must be harmless there: one
// log line, the alarm gone (not retried), the storage as it was, the object still answering.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  cleanupNow,
  freePort,
  makeTempDir,
  startWranglerDev,
} from "../scripts/lib/local-server.mjs";

/** A Worker whose Durable Object class `Holder` is `body`, in its own directory. */
function worker(
  /** @type {string} */ root,
  /** @type {string} */ name,
  /** @type {string} */ body,
) {
  const config = path.join(root, `${name}.toml`);
  writeFileSync(
    path.join(root, `${name}.mjs`),
    `import { DurableObject } from "cloudflare:workers";
export class Holder extends DurableObject {
${body}
}
export default {
  async fetch(request, env) {
    const holder = env.HOLDER.getByName("key@AMS");
    const url = new URL(request.url);
    if (url.pathname === "/up") return new Response("up");
    return Response.json(await holder[url.pathname.slice(1)]());
  },
};
`,
  );
  writeFileSync(
    config,
    `name = "alarm-across-releases"
main = "${name}.mjs"
compatibility_date = "2025-09-01"
[[durable_objects.bindings]]
name = "HOLDER"
class_name = "Holder"
[[migrations]]
tag = "v1"
new_sqlite_classes = ["Holder"]
`,
  );
  return { config };
}

describe("a Durable Object alarm that fires into a release without alarm()", () => {
  after(() => cleanupNow());

  it("is logged once, dropped without a retry, and leaves the storage and the object as they were", async () => {
    const root = makeTempDir("animal-store-rollback-alarm-");
    const persistTo = path.join(root, "shared-state");
    const current = worker(
      root,
      "current",
      `  // As HolderStandingMemory.keep: the permits in storage, an alarm after their last minute.
  keep() {
    this.ctx.storage.kv.put("standing", { permits: 1 });
    this.ctx.storage.setAlarm(Date.now() + 2_000);
    return "kept";
  }
  async alarm() {
    console.log("ALARM HANDLED BY CURRENT");
  }`,
    );
    const previous = worker(
      root,
      "previous",
      `  async read() {
    return { alarm: await this.ctx.storage.getAlarm(), standing: this.ctx.storage.kv.get("standing") ?? null };
  }`,
    );
    const port = await freePort();
    const inspectorPort = await freePort();
    const serve = (/** @type {string} */ name, /** @type {string} */ config) =>
      startWranglerDev({
        name,
        config,
        port,
        inspectorPort,
        dir: root,
        persistTo,
        cwd: root,
        probePath: "/up",
        localObservability: false,
      });

    const first = await serve("current", current.config);
    const kept = await fetch(`${first.url}/keep`).then((r) => r.json());
    assert.equal(kept, "kept");
    await first.stop();

    // The release before serves when the alarm comes due (2 s after it was set).
    const second = await serve("previous", previous.config);
    await new Promise((r) => setTimeout(r, 4_000));
    const read = await fetch(`${second.url}/read`);
    assert.equal(read.status, 200);
    assert.deepEqual(await read.json(), { alarm: null, standing: { permits: 1 } });
    // Past the first retry a failed alarm would get (2 s, then 4 s, …): none.
    await new Promise((r) => setTimeout(r, 8_000));
    const again = await fetch(`${second.url}/read`);
    assert.deepEqual(await again.json(), { alarm: null, standing: { permits: 1 } });
    const log = second.tail(200);
    await second.stop();
    const lines = log.split("\n").filter((l) => l.includes("scheduled alarm without a handler"));
    assert.equal(lines.length, 1, log);
    assert.match(lines[0], /did you remember to export an alarm\(\) function\?/);
    assert.doesNotMatch(log, /ALARM HANDLED BY CURRENT/);
  });
});
