// The operator console in a real headless browser: Debian's chromium driven by puppeteer-core
// (which never downloads a browser), against the Worker under `wrangler dev`. Run with
// `npm run test:browser`; CHROMIUM overrides the browser path (default /usr/bin/chromium).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { startApi } from "../scripts/lib/local-server.mjs";

// This test's own ports (wrangler dev and its inspector), apart from `npm run dev`'s 8787.
const PORT = Number(process.env.CONSOLE_TEST_PORT ?? 8840);
const INSPECTOR_PORT = Number(process.env.CONSOLE_TEST_INSPECTOR_PORT ?? 9340);
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const STEP_MS = 15_000;

let api;
let browser;
let page;
const requests = [];
const failedResponses = [];
const consoleErrors = [];

before(async () => {
  api = await startApi({ port: PORT, inspectorPort: INSPECTOR_PORT, localObservability: false });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // CI runs as root, where Chromium's sandbox cannot start.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on("request", (request) => requests.push(request.url()));
  page.on("response", (response) => {
    if (response.status() >= 400)
      failedResponses.push(`${response.status()} ${new URL(response.url()).pathname}`);
  });
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  // Records every CSP violation the page meets (an inline script or style, another origin…).
  await page.evaluateOnNewDocument(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
});

after(async () => {
  await browser?.close();
  await api?.stop();
});

/** Makes `n` API requests with `key`, from outside the browser, so the key has usage to show. */
async function useKey(key, n) {
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${api.url}/v1/pets?limit=1`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    assert.equal(res.status, 200, await res.text());
  }
}

const textOf = (selector) => page.$eval(selector, (el) => el.textContent ?? "");

test("an operator logs in, creates a key, sees it listed, opens its usage and its audit entry; nothing leaves the origin", async () => {
  const origin = new URL(api.url).origin;
  const response = await page.goto(`${api.url}/admin`, { waitUntil: "networkidle0" });
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-security-policy"], /^default-src 'self'/);

  // Logged out: only the login form shows. A wrong token is refused with the API's message.
  assert.equal(await page.$eval("#app", (el) => el.hidden), true);
  await page.type("#token", "not-the-admin-token");
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(() =>
    document.querySelector("#login .hint")?.textContent?.startsWith("Not accepted"),
  );
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);

  await page.type("#token", api.adminToken);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#app:not([hidden])");
  assert.equal(
    await page.evaluate(() => sessionStorage.getItem("animal-store-admin-token")),
    api.adminToken,
  );
  assert.equal(await page.evaluate(() => document.cookie), "");
  assert.ok(!page.url().includes(api.adminToken));

  // Create a key through the page: the secret is shown once, and the key is listed.
  const name = `browser-${Date.now()}`;
  await page.type("#create-form input[name=name]", name);
  await page.select("#create-form select[name=plan]", "pro");
  await page.type("#create-form input[name=ownerId]", "acct-browser");
  await page.click("#create-form button[type=submit]");
  await page.waitForSelector("#secret:not([hidden])");
  const secret = await textOf("#secret-value");
  assert.match(secret, /^pet_test_[0-9A-Za-z]{43}$/);
  const row = await page.waitForFunction(
    (n) =>
      [...document.querySelectorAll("#key-table tbody tr")].find((tr) =>
        tr.textContent.includes(n),
      ),
    {},
    name,
  );
  const keyId = await row.evaluate((tr) => tr.dataset.keyId);
  assert.match(keyId, /^key_[0-9A-Za-z]{20}$/);
  assert.match(await row.evaluate((tr) => tr.textContent), /pro.*active.*acct-browser/);

  // Use the key, then open it: today's bar and the summary show those 3 requests, live.
  await useKey(secret, 3);
  await row.evaluate((tr) => tr.click());
  await page.waitForFunction(
    (id) =>
      document.querySelector("#detail")?.dataset.keyId === id &&
      document.querySelector("#usage-summary")?.textContent?.includes("Today: 3 admitted"),
    {},
    keyId,
  );
  const bars = await page.$$eval("#usage-chart rect.admitted", (rects) =>
    rects.map((r) => ({ day: r.dataset.day, count: Number(r.dataset.count) })),
  );
  assert.equal(bars.length, 30);
  assert.deepEqual(bars.at(-1), { day: new Date().toISOString().slice(0, 10), count: 3 });
  assert.equal(
    bars.slice(0, -1).reduce((n, b) => n + b.count, 0),
    0,
  );
  assert.match(await textOf("#detail-now"), /This minute: 3 of 300\. Today: 3 of 10000\./);

  // Its audit entry: created by this token ("admin"), with the fields it was created with.
  const entry = await page.waitForSelector(`#detail-audit li[data-action="create"]`);
  const entryText = await entry.evaluate((li) => li.textContent);
  assert.match(entryText, new RegExp(`admin create ${keyId}`));
  assert.match(entryText, /ownerId: null → "acct-browser"/);
  assert.ok(!entryText.includes(secret));
  assert.ok(
    await page.$eval(
      "#audit-list",
      (ol, id) => [...ol.querySelectorAll("li")].some((li) => li.dataset.keyId === id),
      keyId,
    ),
  );

  // Disable it from the page: the API refuses the key; the audit trail shows who did it.
  await page.click("#toggle-enabled");
  await page.waitForFunction(() =>
    document.querySelector("#detail-title")?.textContent?.endsWith("disabled"),
  );
  const refused = await fetch(`${api.url}/v1/pets`, {
    headers: { Authorization: `Bearer ${secret}` },
  });
  assert.equal(refused.status, 401);
  await page.waitForSelector(`#detail-audit li[data-action="disable"]`);

  // Revoke asks for confirmation first; cancelling changes nothing.
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm-revoke[open]");
  await page.click('#confirm-revoke button[value="cancel"]');
  await page.waitForSelector("#confirm-revoke:not([open])");
  assert.match(await textOf("#detail-title"), /disabled$/);
  await page.click('#actions button[data-action="revoke"]');
  await page.waitForSelector("#confirm-revoke[open]");
  await page.click("#confirm-revoke-button");
  await page.waitForFunction(() =>
    document.querySelector("#detail-title")?.textContent?.endsWith("revoked"),
  );

  // Nothing left the origin, and nothing broke the CSP.
  assert.ok(requests.length >= 6, `only ${requests.length} requests seen`);
  const elsewhere = requests.filter((url) => new URL(url).origin !== origin);
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  assert.ok(!requests.some((url) => url.includes(api.adminToken)), "the token was in a URL");
  // The wrong-token login's 401 is the only failed response (and console error).
  assert.deepEqual(failedResponses, ["401 /admin/v1/whoami"]);
  assert.equal(consoleErrors.filter((text) => !/status of 401/.test(text)).length, 0);

  // Logging out forgets the token.
  await page.click("#logout");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  assert.equal(await page.$eval("#login", (el) => el.hidden), false);
});
