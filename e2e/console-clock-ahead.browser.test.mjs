// @ts-check
// The operator console in a browser whose clock is a day ahead of the server's UTC date (a
// machine set wrong, or the minutes around midnight with a little skew). The API refuses a usage
// day after its own today, so the key page asks for its range by its first day only and lets the
// server end it at the server's today: the chart and the CSV still load. Run with
// `npm run test:e2e -- e2e/console-clock-ahead.browser.test.mjs`.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { startApiOnFreePorts } from "../scripts/lib/local-server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const DAY_MS = 86_400_000;

let api;
let browser;
let page;
const usageRequests = [];

before(async () => {
  api = await startApiOnFreePorts({ localObservability: false });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  page.setDefaultTimeout(15_000);
  page.on("response", (response) => {
    const url = new URL(response.url());
    if (url.pathname.endsWith("/usage")) usageRequests.push(`${response.status()} ${url.search}`);
  });
  // The page's clock runs one day ahead: Date.now() and new Date() both.
  await page.evaluateOnNewDocument((ahead) => {
    const RealDate = Date;
    const now = () => RealDate.now() + ahead;
    class AheadDate extends RealDate {
      /** @param {[string | number | Date] | []} args */
      constructor(...args) {
        if (args.length === 0) super(now());
        else super(args[0]);
      }
      static now() {
        return now();
      }
    }
    globalThis.Date = /** @type {DateConstructor} */ (/** @type {unknown} */ (AheadDate));
  }, DAY_MS);
});

after(async () => {
  await browser?.close();
  await api?.stop();
});

test("a browser a day ahead of the server still draws a key's usage", async () => {
  const res = await fetch(`${api.url}/admin/v1/keys`, {
    method: "POST",
    headers: { Authorization: `Bearer ${api.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name: "clock-ahead", plan: "free" }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id, key } = await res.json();
  const used = await fetch(`${api.url}/v1/pets?limit=1`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  assert.equal(used.status, 200);

  await page.goto(`${api.url}/admin/keys/${id}?days=7`, { waitUntil: "networkidle0" });
  assert.equal(
    await page.evaluate(() => new Date().toISOString().slice(0, 10)),
    new Date(Date.now() + DAY_MS).toISOString().slice(0, 10),
    "the page's clock is a day ahead",
  );
  await page.type("#token", api.adminToken);
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(
    (k) =>
      document.body.dataset.view === "key" &&
      /** @type {HTMLElement | null} */ (document.querySelector("#detail"))?.dataset.keyId === k &&
      !document.querySelector("#app")?.hasAttribute("aria-busy") &&
      document.querySelectorAll("#usage-chart g.day").length > 0,
    {},
    id,
  );
  assert.deepEqual(
    usageRequests.filter((r) => !r.startsWith("200 ")),
    [],
    "every usage read answered 200",
  );
  assert.ok(
    usageRequests.some((r) => r.startsWith("200 ?from=")),
    `the key's range was read: ${usageRequests.join(", ")}`,
  );
  assert.match(await page.$eval("#usage-summary", (el) => el.textContent ?? ""), /1 admitted/);
});
