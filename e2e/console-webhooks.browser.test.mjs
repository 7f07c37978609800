// The console's webhook endpoints in headless Chromium against `wrangler dev`: the list with its
// empty states and owner filter, a new endpoint whose signing secret is shown once, an endpoint's
// page (event types, roll, disable, enable, delete), a read-only token offered no write, and the
// views at 1366 px and 390 px without horizontal overflow. CHROMIUM overrides the browser path
// (default /usr/bin/chromium); CONSOLE_SCREENSHOTS=<dir> saves a screenshot of each view there.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { startApiOnFreePorts } from "../scripts/lib/local-server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;
const WIDE = { width: 1366, height: 768 };
const PHONE = { width: 390, height: 844 };

let api;
let browser;
let page;
let receiver;
const consoleErrors = [];
/** What the local receiver was sent: path, webhook-id and event type of each delivery. */
const received = [];

before(async () => {
  // Local receivers allowed (as `npm run dev` does), so deliveries reach the receiver below.
  api = await startApiOnFreePorts({
    localObservability: false,
    vars: { WEBHOOK_LOCAL_RECEIVERS: "on" },
  });
  // A receiver on this machine: 200 on /ok, 410 Gone on /gone, 500 on anything else.
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      received.push({
        path: req.url,
        id: req.headers["webhook-id"],
        type: JSON.parse(body || "{}").type,
      });
      res.writeHead(req.url === "/ok" ? 200 : req.url === "/gone" ? 410 : 500).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  await page.setViewport(WIDE);
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  await page.evaluateOnNewDocument(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
  if (SCREENSHOTS) mkdirSync(SCREENSHOTS, { recursive: true });
});

after(async () => {
  receiver?.close();
  await browser?.close();
  await api?.stop();
});

/** Calls the admin API from outside the page; the parsed answer (null for 204). */
async function admin(method, urlPath, body) {
  const res = await fetch(`${api.url}/admin/v1${urlPath}`, {
    method,
    headers: {
      Authorization: `Bearer ${api.adminToken}`,
      ...(body ? { "Content-Type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

const textOf = (selector) => page.$eval(selector, (el) => el.textContent ?? "");
const shown = (selector) =>
  page.$eval(selector, (el) => el.getClientRects().length > 0).catch(() => false);
const pathAndQuery = () => {
  const url = new URL(page.url());
  return url.pathname + url.search;
};

function waitForView(view) {
  return page.waitForFunction(
    (v) =>
      document.body.dataset.view === v &&
      !document.querySelector("#app")?.hasAttribute("aria-busy") &&
      !document.querySelector(`#app > [data-view="${v}"]`)?.hidden,
    {},
    view,
  );
}

async function visit(urlPath, view) {
  await page.goto(`${api.url}${urlPath}`, { waitUntil: "networkidle0" });
  await waitForView(view);
}

function waitForText(selector, text) {
  return page
    .waitForFunction(
      (s, t) => document.querySelector(s)?.textContent?.includes(t),
      {},
      selector,
      text,
    )
    .catch(async (err) => {
      throw new Error(
        `${selector}: expected "${text}", the page said "${await textOf(selector)}"`,
        {
          cause: err,
        },
      );
    });
}

/** Confirms the open dialog (after checking what it asks). */
async function confirmDialog(question) {
  await page.waitForSelector("#confirm[open]");
  assert.match(await textOf("#confirm-text"), question);
  await page.click("#confirm-button");
}

let endpointId;
let firstSecret;

test("no endpoints yet: the list says what an endpoint is and offers the first one; the nav leads there", async () => {
  await page.goto(`${api.url}/admin/keys`, { waitUntil: "networkidle0" });
  await page.type("#token", api.adminToken);
  await page.click("#login-form button[type=submit]");
  await waitForView("keys");
  await page.click('#nav a[data-nav="webhooks"]');
  await waitForView("hooks");
  assert.equal(pathAndQuery(), "/admin/webhooks");
  assert.equal(await page.title(), "Webhooks — Animal Store console");
  assert.equal(await shown("#first-hook"), true);
  assert.equal(await shown("#hook-table"), false);
  assert.equal(await shown("#no-hooks"), false);
  assert.equal(
    await page.$eval('#nav a[aria-current="page"]', (a) => a.getAttribute("href")),
    "/admin/webhooks",
  );
  await page.click("#first-hook a.button");
  await waitForView("hook-new");
  assert.equal(pathAndQuery(), "/admin/webhooks/new");
});

test("a new endpoint's owner is chosen, never assumed: one owner (with its id) or every owner", async () => {
  await visit("/admin/webhooks/new", "hook-new");
  const form = "#hook-form";
  assert.deepEqual(
    await page.$$eval(`${form} input[name="ownerScope"]`, (radios) =>
      radios.map((r) => [r.value, r.checked]),
    ),
    [
      ["one", false],
      ["every", false],
    ],
  );
  assert.equal(await page.$eval(`${form} input[name="ownerId"]`, (i) => i.disabled), true);
  await page.type(`${form} input[name="url"]`, "https://hooks.example.com/owner-choice");
  await page.click(`${form} input[value="key.banned"]`);
  await page.click(`${form} button[type=submit]`);
  await waitForText(`${form} output`, "Choose whose keys it is for: one owner, or every owner.");
  await page.click(`${form} input[name="ownerScope"][value="one"]`);
  assert.equal(
    await page.evaluate(() => document.activeElement?.getAttribute("name")),
    "ownerId",
    "choosing one owner moves to its id",
  );
  await page.click(`${form} button[type=submit]`);
  await waitForText(`${form} output`, "Give the owner id, or choose every owner.");
  assert.equal((await admin("GET", "/webhooks")).body.data.length, 0, "nothing created");
  // A typed id does not count once every owner is chosen: the field is off and not sent.
  await page.type(`${form} input[name="ownerId"]`, "acct_typed");
  await page.click(`${form} input[name="ownerScope"][value="every"]`);
  assert.equal(await page.$eval(`${form} input[name="ownerId"]`, (i) => i.disabled), true);
  await page.click(`${form} button[type=submit]`);
  await waitForView("hook");
  const id = await page.$eval("#hook", (s) => s.dataset.hookId);
  assert.equal((await admin("GET", `/webhooks/${id}`)).body.ownerId, null);
  assert.match(await textOf("#hook-fields"), /Owner\s*every owner's keys/);
  assert.equal((await admin("DELETE", `/webhooks/${id}`)).status, 204);
  // The form is blank again for the next endpoint: no choice made.
  await visit("/admin/webhooks/new", "hook-new");
  assert.deepEqual(
    await page.$$eval(`${form} input[name="ownerScope"]:checked`, (radios) => radios.length),
    0,
  );
});

test("a new endpoint: a URL the API refuses says why and stays; a good one opens its page with the secret, once", async () => {
  await visit("/admin/webhooks/new", "hook-new");
  assert.deepEqual(
    await page.$$eval('#hook-form input[name="eventTypes"]', (boxes) => boxes.map((b) => b.value)),
    [
      "quota.day.warning",
      "quota.day.exhausted",
      "key.banned",
      "key.unbanned",
      "key.revoked",
      "key.rolled",
      "key.expiring",
    ],
  );
  await page.type('#hook-form input[name="url"]', "https://127.0.0.1/hook");
  await page.click('#hook-form input[name="ownerScope"][value="one"]');
  await page.click('#hook-form input[value="quota.day.warning"]');
  await page.type('#hook-form input[name="ownerId"]', "acct_42");
  await page.click("#hook-form button[type=submit]");
  await waitForText("#hook-form output", "url: ");
  assert.equal(pathAndQuery(), "/admin/webhooks/new");
  assert.equal((await admin("GET", "/webhooks")).body.data.length, 0);

  await page.$eval('#hook-form input[name="url"]', (i) => {
    i.value = "https://hooks.example.com/animal-store";
  });
  await page.type('#hook-form input[name="description"]', "billing alerts");
  await page.click('#hook-form input[value="quota.day.exhausted"]');
  await page.click("#hook-form button[type=submit]");
  await waitForView("hook");
  endpointId = await page.$eval("#hook", (s) => s.dataset.hookId);
  assert.match(endpointId, /^whe_[0-9A-Za-z]{20}$/);
  assert.equal(pathAndQuery(), `/admin/webhooks/${endpointId}`);
  assert.equal(await shown("#hook-created-secret"), true);
  firstSecret = await textOf("#hook-created-secret .secret-value");
  assert.match(firstSecret, /^whsec_[A-Za-z0-9+/=]+$/);
  assert.match(await textOf("#hook-created-secret"), /shown once/);
  const stored = (await admin("GET", `/webhooks/${endpointId}`)).body;
  assert.deepEqual(stored.eventTypes, ["quota.day.warning", "quota.day.exhausted"]);
  assert.equal(stored.ownerId, "acct_42");
  assert.equal(stored.description, "billing alerts");
  assert.equal(await textOf("#hook-title"), "https://hooks.example.com/animal-store");
  assert.match(await textOf("#hook-fields"), /Owner\s*acct_42/);
  assert.match(
    await textOf("#hook-fields"),
    /Event types\s*quota\.day\.warning, quota\.day\.exhausted/,
  );

  // Shown once: the same page opened again has no secret in it.
  await visit(`/admin/webhooks/${endpointId}`, "hook");
  assert.equal(await shown("#hook-created-secret"), false);
  assert.ok(!(await page.content()).includes(firstSecret));
});

test("an endpoint's page changes its event types, rolls its secret, disables, enables and deletes it", async () => {
  await visit(`/admin/webhooks/${endpointId}`, "hook");
  const events = '#hook form[data-hook-action="events"]';
  assert.deepEqual(
    await page.$$eval(`${events} input:checked`, (boxes) => boxes.map((b) => b.value)),
    ["quota.day.warning", "quota.day.exhausted"],
  );
  await page.click(`${events} input[value="quota.day.warning"]`);
  await page.click(`${events} input[value="key.banned"]`);
  await page.click(`${events} button[type=submit]`);
  await waitForText(`${events} output`, "Sends quota.day.exhausted, key.banned.");
  assert.deepEqual((await admin("GET", `/webhooks/${endpointId}`)).body.eventTypes, [
    "quota.day.exhausted",
    "key.banned",
  ]);
  // None checked: refused in the page, nothing sent.
  for (const box of await page.$$(`${events} input:checked`)) await box.click();
  await page.click(`${events} button[type=submit]`);
  await waitForText(`${events} output`, "Choose at least one event type.");
  assert.equal((await admin("GET", `/webhooks/${endpointId}`)).body.eventTypes.length, 2);

  const roll = '#hook form[data-hook-action="roll"]';
  await page.select(`${roll} select`, "3600");
  await page.click(`${roll} button[type=submit]`);
  await waitForText(`${roll} output`, "New signing secret; the old one also signs until");
  const rolledSecret = await textOf("#hook-rolled-secret .secret-value");
  assert.match(rolledSecret, /^whsec_/);
  assert.notEqual(rolledSecret, firstSecret);
  const rolled = (await admin("GET", `/webhooks/${endpointId}`)).body;
  assert.equal(
    Date.parse(rolled.previousSecretExpiresAt) - Date.parse(rolled.secretRolledAt),
    3_600_000,
  );
  assert.match(await textOf("#hook-fields"), /Old secret signs until/);

  const state = '#hook form[data-hook-action="state"]';
  await page.click("#hook-toggle");
  await confirmDialog(/^Disable https:\/\/hooks\.example\.com\/animal-store\?/);
  await waitForText(`${state} output`, "Disabled.");
  assert.equal((await admin("GET", `/webhooks/${endpointId}`)).body.enabled, false);
  assert.equal(await textOf("#hook-badges"), "disabled");
  assert.match(await textOf("#hook-fields"), /disabled: disabled by an operator/);
  assert.equal(await textOf("#hook-toggle"), "Enable");
  await page.click("#hook-toggle");
  await waitForText(`${state} output`, "Enabled: deliveries resume.");
  assert.equal((await admin("GET", `/webhooks/${endpointId}`)).body.enabled, true);

  // Its audit panel: each change, newest first, by whom; "All entries" is the filtered trail.
  const trail = () =>
    page.$$eval("#hook-audit > li", (items) =>
      items.map((li) => [li.dataset.action, li.dataset.actor, li.dataset.keyId]),
    );
  assert.deepEqual(await trail(), [
    ["webhook_update", "admin", endpointId],
    ["webhook_update", "admin", endpointId],
    ["webhook_roll_secret", "admin", endpointId],
    ["webhook_update", "admin", endpointId],
    ["webhook_create", "admin", endpointId],
  ]);
  assert.match(await textOf("#hook-audit > li:first-child"), /enabled|disabledAt/);
  assert.equal(
    await page.$eval("#hook-audit-all", (a) => a.getAttribute("href")),
    `/admin/audit?endpointId=${endpointId}`,
  );
  // Its creation shows the fields as created (no before → after); event types read as words.
  assert.doesNotMatch(await textOf("#hook-audit > li:last-child"), /→/);
  assert.match(
    await textOf("#hook-audit > li:last-child"),
    /eventTypes\s*quota\.day\.warning, quota\.day\.exhausted/,
  );
  // An entry's id links to the endpoint's page, not a key's.
  assert.equal(
    await page.$eval("#hook-audit > li:last-child a.mono", (a) => a.getAttribute("href")),
    `/admin/webhooks/${endpointId}`,
  );

  await page.click("#hook [data-hook-delete]");
  await page.waitForSelector("#confirm[open]");
  await page.click('#confirm button[value="cancel"]');
  await waitForText(`${state} output`, "Not deleted.");
  assert.equal((await admin("GET", `/webhooks/${endpointId}`)).status, 200);
  await page.click("#hook [data-hook-delete]");
  await confirmDialog(
    /^Delete https:\/\/hooks\.example\.com\/animal-store\? It and its delivery log/,
  );
  await waitForView("hooks");
  assert.equal(pathAndQuery(), "/admin/webhooks");
  assert.match(await textOf("#message"), /^Deleted https:\/\/hooks\.example\.com\/animal-store\./);
  assert.equal((await admin("GET", `/webhooks/${endpointId}`)).status, 404);

  // Its URL now names nothing.
  await page.goto(`${api.url}/admin/webhooks/${endpointId}`, { waitUntil: "networkidle0" });
  await page.waitForFunction(
    () =>
      !document.querySelector("#view-missing")?.hidden &&
      !document.querySelector("#app")?.hasAttribute("aria-busy"),
  );
  assert.equal(await shown("#hook"), false);
  // Its trail outlives it: the page says who deleted it and links the endpoint's entries.
  assert.equal(
    await textOf("#missing-text"),
    `Webhook endpoint ${endpointId} was deleted by admin. Its audit trail`,
  );
  await page.click("#missing-text a");
  await waitForView("audit");
  assert.equal(pathAndQuery(), `/admin/audit?endpointId=${endpointId}`);
  assert.equal(
    await page.$eval('#audit-filters input[name="endpointId"]', (i) => i.value),
    endpointId,
  );
  assert.deepEqual(
    await page.$$eval("#audit-list > li", (items) => items.map((li) => li.dataset.action)),
    [
      "webhook_delete",
      "webhook_update",
      "webhook_update",
      "webhook_roll_secret",
      "webhook_update",
      "webhook_create",
    ],
  );
  // An id that never named an endpoint says just that.
  await page.goto(`${api.url}/admin/webhooks/whe_${"0".repeat(20)}`, { waitUntil: "networkidle0" });
  await page.waitForFunction(
    () =>
      !document.querySelector("#view-missing")?.hidden &&
      !document.querySelector("#app")?.hasAttribute("aria-busy"),
  );
  assert.equal(
    await textOf("#missing-text"),
    `No webhook endpoint has the id whe_${"0".repeat(20)}.`,
  );
});

test("the list: every endpoint with owner, events and state; the owner filter is in the URL", async () => {
  const made = [];
  for (const [url, ownerId, eventTypes] of [
    ["https://hooks.example.com/a", "acct_1", ["key.banned"]],
    ["https://hooks.example.com/b", undefined, ["quota.day.warning", "quota.day.exhausted"]],
  ]) {
    const { status, body } = await admin("POST", "/webhooks", { url, ownerId, eventTypes });
    assert.equal(status, 201);
    made.push(body);
  }
  await admin("PATCH", `/webhooks/${made[0].id}`, { enabled: false });
  await visit("/admin/webhooks", "hooks");
  const rows = await page.$$eval("#hook-table tbody tr", (trs) =>
    trs.map((tr) => [...tr.cells].map((td) => td.innerText.replace(/\s+/g, " ").trim())),
  );
  assert.deepEqual(rows, [
    [`https://hooks.example.com/a ${made[0].id}`, "acct_1", "key.banned", "disabled"],
    [
      `https://hooks.example.com/b ${made[1].id}`,
      "every owner",
      "quota.day.warning, quota.day.exhausted",
      "enabled",
    ],
  ]);
  assert.match(await textOf("#hooks-count"), /^2 endpoints$/);

  await page.type('#hook-filters input[name="ownerId"]', "acct_1");
  await page.click("#hook-filters button[type=submit]");
  await page.waitForFunction(() => location.search === "?ownerId=acct_1");
  await waitForView("hooks");
  assert.equal(await page.$$eval("#hook-table tbody tr", (trs) => trs.length), 1);
  assert.equal(await shown("#clear-hook-filters"), true);
  await visit("/admin/webhooks?ownerId=nobody", "hooks");
  assert.equal(await shown("#no-hooks"), true);
  assert.equal(await shown("#first-hook"), false);
  assert.equal(await page.$eval('#hook-filters input[name="ownerId"]', (i) => i.value), "nobody");

  await visit("/admin/webhooks", "hooks");
  await page.click(`#hook-table a[href="/admin/webhooks/${made[1].id}"]`);
  await waitForView("hook");
  assert.equal(pathAndQuery(), `/admin/webhooks/${made[1].id}`);
  assert.match(await textOf("#hook-fields"), /Owner\s*every owner's keys/);
});

/** The open endpoint's delivery rows as shown: status, attempts, response and latency cells. */
const deliveryRows = () =>
  page.$$eval("#delivery-table tbody tr", (trs) =>
    trs.map((tr) => ({
      id: tr.dataset.deliveryId,
      status: tr.dataset.status,
      cells: [...tr.cells].slice(0, 5).map((td) => td.innerText.replace(/\s+/g, " ").trim()),
    })),
  );

/** Clicks Refresh until the first delivery row is `status` (deliveries are sent from a queue). */
async function refreshUntil(status) {
  for (let i = 0; i < 60; i++) {
    const [first] = await deliveryRows();
    if (first?.status === status) return first;
    await new Promise((r) => setTimeout(r, 500));
    await page.click("#refresh-deliveries");
    await page.waitForNetworkIdle({ idleTime: 100 });
  }
  throw new Error(`no delivery became ${status}: ${JSON.stringify(await deliveryRows())}`);
}

test("the delivery log: a test event delivered (status, attempts, response, latency), sent again with the same id; a failing receiver's 500", async () => {
  const base = `http://127.0.0.1:${receiver.address().port}`;
  const ok = await admin("POST", "/webhooks", {
    url: `${base}/ok`,
    eventTypes: ["key.banned"],
  });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  await visit(`/admin/webhooks/${ok.body.id}`, "hook");
  assert.equal(await shown("#no-deliveries"), true);
  assert.equal(await shown("#delivery-table"), false);

  await page.click("#send-test");
  await waitForText("#deliveries-result", "Test event evt_");
  const delivered = await refreshUntil("delivered");
  const [event, status, attempts, response, latency] = delivered.cells;
  assert.match(event, /^webhook\.test evt_\w+$/);
  assert.equal(status, "delivered");
  assert.equal(attempts, "1");
  assert.equal(response, "200");
  assert.match(latency, /^\d[\d,]* ms$/);
  const logged = (await admin("GET", `/webhooks/${ok.body.id}/deliveries`)).body.data;
  assert.equal(logged.length, 1);
  assert.equal(logged[0].id, delivered.id);
  assert.equal(`${logged[0].latencyMs.toLocaleString("en-US")} ms`, latency);
  const eventId = logged[0].eventId;
  assert.deepEqual(
    received.filter((r) => r.id === eventId).map((r) => [r.path, r.type]),
    [["/ok", "webhook.test"]],
  );

  await page.click(`#delivery-table tr[data-delivery-id="${delivered.id}"] button`);
  await waitForText("#deliveries-result", `webhook.test ${eventId} queued again`);
  for (let i = 0; i < 60 && received.filter((r) => r.id === eventId).length < 2; i++)
    await new Promise((r) => setTimeout(r, 500));
  assert.equal(received.filter((r) => r.id === eventId).length, 2, "sent again, same webhook-id");
  await page.click("#refresh-deliveries");
  await page.waitForFunction(
    (id) =>
      document.querySelector(`#delivery-table tr[data-delivery-id="${id}"] td:nth-child(3)`)
        ?.textContent === "2",
    {},
    delivered.id,
  );

  const failing = await admin("POST", "/webhooks", {
    url: `${base}/fail`,
    eventTypes: ["key.banned"],
  });
  await visit(`/admin/webhooks/${failing.body.id}`, "hook");
  await page.click("#send-test");
  const retrying = await refreshUntil("retrying");
  assert.deepEqual(retrying.cells.slice(1, 3), ["retrying", "1"]);
  assert.match(retrying.cells[3], /^500\b/, "the receiver's answer, and what went wrong under it");

  // A receiver that answers 410 Gone disables its endpoint; the audit panel shows it, by system.
  const gone = await admin("POST", "/webhooks", {
    url: `${base}/gone`,
    eventTypes: ["key.banned"],
  });
  await visit(`/admin/webhooks/${gone.body.id}`, "hook");
  await page.click("#send-test");
  for (let i = 0; i < 60 && (await admin("GET", `/webhooks/${gone.body.id}`)).body.enabled; i++)
    await new Promise((r) => setTimeout(r, 500));
  await visit(`/admin/webhooks/${gone.body.id}`, "hook");
  assert.equal(await textOf("#hook-badges"), "disabled");
  assert.deepEqual(
    await page.$$eval("#hook-audit > li", (items) =>
      items.map((li) => [li.dataset.action, li.dataset.actor]),
    ),
    [
      ["webhook_disable", "system"],
      ["webhook_create", "admin"],
    ],
  );
});

test("each webhook view at 1366 px and 390 px, light and dark: nothing overflows", async () => {
  const long = await admin("POST", "/webhooks", {
    url: `https://receiver.a-rather-long-hostname-for-a-narrow-screen.example.com/hooks/${"x".repeat(120)}`,
    ownerId: "customer-with-a-long-account-identifier-0123456789",
    description: "alerts for the billing team, routed to the on-call rotation",
    eventTypes: [
      "quota.day.warning",
      "quota.day.exhausted",
      "key.banned",
      "key.unbanned",
      "key.revoked",
      "key.rolled",
      "key.expiring",
    ],
  });
  assert.equal(long.status, 201);
  // Its page with a delivery in its log (to a host this machine cannot reach: retried).
  assert.equal((await admin("POST", `/webhooks/${long.body.id}/test`)).status, 202);
  const VIEWS = [
    { name: "webhooks", url: "/admin/webhooks", view: "hooks" },
    { name: "webhooks-no-match", url: "/admin/webhooks?ownerId=nobody", view: "hooks" },
    { name: "webhook-new", url: "/admin/webhooks/new", view: "hook-new" },
    { name: "webhook", url: `/admin/webhooks/${long.body.id}`, view: "hook" },
  ];
  const problems = [];
  for (const scheme of ["light", "dark"]) {
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: scheme }]);
    for (const viewport of [WIDE, PHONE]) {
      await page.setViewport(viewport);
      for (const { name, url, view } of VIEWS) {
        await visit(url, view);
        if (view === "hook") {
          // The page as it is right after a roll: the new secret shown beside the button.
          await page.click('#hook form[data-hook-action="roll"] button[type=submit]');
          await waitForText('#hook form[data-hook-action="roll"] output', "New signing secret");
        }
        const overflow = await page.evaluate(
          () => document.scrollingElement.scrollWidth - innerWidth,
        );
        if (overflow > 0)
          problems.push(`horizontal overflow: ${name} at ${viewport.width} px, ${scheme}`);
        if (SCREENSHOTS)
          await page.screenshot({
            path: path.join(SCREENSHOTS, `${name}-${viewport.width}-${scheme}.png`),
            fullPage: true,
          });
      }
    }
  }
  assert.deepEqual(problems, []);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  await page.setViewport(WIDE);
});

test("a read-only token sees the endpoints and no write action", async () => {
  await page.evaluate(() => sessionStorage.clear());
  await page.goto(`${api.url}/admin/webhooks`, { waitUntil: "networkidle0" });
  await page.type("#token", api.readToken);
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(() => document.body.dataset.access === "read");
  await waitForView("hooks");
  assert.ok((await page.$$("#hook-table tbody tr")).length >= 1);
  assert.equal(await shown('#view-hooks a[href="/admin/webhooks/new"]'), false);
  const id = await page.$eval("#hook-table tbody tr", (tr) => tr.dataset.hookId);
  await visit(`/admin/webhooks/${id}`, "hook");
  assert.equal(await shown("#hook-toggle"), false);
  assert.equal(await shown('#hook form[data-hook-action="roll"]'), false);
  await visit("/admin/webhooks/new", "hook-new");
  assert.equal(await shown("#hook-form"), false);
  assert.equal(await shown("#view-hook-new [data-read-only-note]"), true);
});

test("no CSP violation and no script error on the way", async () => {
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
  assert.deepEqual(
    consoleErrors.filter((text) => !/status of 4\d\d/.test(text)),
    [],
  );
});
