// @ts-check
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

/** Opens the console at `urlPath`, logs in with `token`, and waits for the view to be drawn. */
async function logInAt(urlPath, token) {
  await page.goto(`${api.url}${urlPath}`, { waitUntil: "networkidle0" });
  await page.type("#token", token);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#app:not([hidden])");
  // The answer of GET /whoami has arrived once the body carries the token's access.
  await page.waitForFunction(
    () => document.body.dataset.access !== undefined && !document.querySelector("#app[aria-busy]"),
  );
}

async function logInAndOpen(token, keyId) {
  await logInAt(`/admin/keys/${keyId}`, token);
  await page.waitForFunction(
    (id) =>
      /** @type {HTMLElement | null} */ (document.querySelector("#detail"))?.dataset.keyId === id &&
      !document.querySelector("#detail")?.hasAttribute("aria-busy"),
    {},
    keyId,
  );
}

/** Where each view offers a write: the key list's "New key", the new key's form, a key's actions. */
const WRITES = {
  keys: ['#view-keys a[href="/admin/keys/new"]'],
  new: ["#create-form"],
  key: ["#actions", '#actions button[data-action="revoke"]'],
};

test("a read-only token sees keys and their details but no write action; a full token sees them", async () => {
  const key = await issueKey(api, { name: "looked-at", plan: "pro" });

  await logInAndOpen(api.readToken, key.id);
  assert.equal(await page.evaluate(() => document.body.dataset.access), "read");
  assert.match(await page.$eval("#whoami", (w) => w.textContent), /read-only/);
  assert.equal(await shown("#detail-fields"), true);
  for (const selector of WRITES.key)
    assert.equal(await shown(selector), false, `${selector} is shown to a read-only token`);
  await page.click('#nav a[data-nav="keys"]');
  await page.waitForSelector(`#key-table tbody tr[data-key-id="${key.id}"]`);
  for (const selector of WRITES.keys)
    assert.equal(await shown(selector), false, `${selector} is shown to a read-only token`);
  await page.goto(`${api.url}/admin/keys/new`, { waitUntil: "networkidle0" });
  await page.waitForFunction(() => document.body.dataset.view === "new");
  for (const selector of WRITES.new)
    assert.equal(await shown(selector), false, `${selector} is shown to a read-only token`);
  assert.equal(await shown("[data-read-only-note]"), true);
  await page.click("#logout");

  await logInAndOpen(api.adminToken, key.id);
  assert.equal(await page.evaluate(() => document.body.dataset.access), "full");
  for (const selector of WRITES.key)
    assert.equal(await shown(selector), true, `${selector} is hidden from a full-access token`);
  await page.click('#nav a[data-nav="keys"]');
  await page.waitForSelector(`#key-table tbody tr[data-key-id="${key.id}"]`);
  for (const selector of WRITES.keys)
    assert.equal(await shown(selector), true, `${selector} is hidden from a full-access token`);
  await page.click('#view-keys a[href="/admin/keys/new"]');
  await page.waitForFunction(() => document.body.dataset.view === "new");
  for (const selector of WRITES.new)
    assert.equal(await shown(selector), true, `${selector} is hidden from a full-access token`);
  assert.equal(await shown("[data-read-only-note]"), false);
});
