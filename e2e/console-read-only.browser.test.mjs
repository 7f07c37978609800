// The operator console with a read-only admin token (ADMIN_READ_TOKENS), in headless Chromium
// against `wrangler dev`: it lists and opens keys but offers no write action; a full-access token
// in the same page sees them again. CHROMIUM overrides the browser path (default /usr/bin/chromium).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { issueKey, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

let api;
let browser;
let page;

before(async () => {
  api = await startApiOnFreePorts({ localObservability: false });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  page.setDefaultTimeout(15_000);
});

after(async () => {
  await browser?.close();
  await api?.stop();
});

/** Whether the element `selector` is laid out (not display: none, itself or through an ancestor). */
const shown = (selector) => page.$eval(selector, (el) => el.getClientRects().length > 0);

async function logInAndOpen(token, keyId) {
  await page.goto(`${api.url}/admin`, { waitUntil: "networkidle0" });
  await page.type("#token", token);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#app:not([hidden])");
  const row = await page.waitForSelector(`#key-table tbody tr[data-key-id="${keyId}"]`);
  await row.evaluate((tr) => tr.click());
  await page.waitForFunction(
    (id) => document.querySelector("#detail")?.dataset.keyId === id,
    {},
    keyId,
  );
  // The answer of GET /whoami has arrived once the body carries the token's access.
  await page.waitForFunction(() => document.body.dataset.access !== undefined);
}

test("a read-only token sees keys and their details but no write action; a full token sees them", async () => {
  const key = await issueKey(api, { name: "looked-at", plan: "pro" });

  await logInAndOpen(api.readToken, key.id);
  assert.equal(await page.evaluate(() => document.body.dataset.access), "read");
  assert.equal(await shown("#key-table"), true);
  assert.equal(await shown("#detail-fields"), true);
  for (const selector of ["#create-form", "#actions", '#actions button[data-action="revoke"]'])
    assert.equal(await shown(selector), false, `${selector} is shown to a read-only token`);
  await page.click("#logout");

  await logInAndOpen(api.adminToken, key.id);
  assert.equal(await page.evaluate(() => document.body.dataset.access), "full");
  for (const selector of ["#create-form", "#actions", '#actions button[data-action="revoke"]'])
    assert.equal(await shown(selector), true, `${selector} is hidden from a full-access token`);
});
