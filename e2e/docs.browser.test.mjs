// @ts-check
// /docs in a real headless browser (Debian's chromium, driven by puppeteer-core): the page shows
// the three operations of the served document, and no request leaves the origin (none is even
// attempted: the Content-Security-Policy reports any attempt as a violation).
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import puppeteer from "puppeteer-core";
import { cleanupNow, startApiOnFreePorts } from "../scripts/lib/local-server.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// DOCS_SCREENSHOTS=<dir> saves a screenshot of each reference page there.
const SCREENSHOTS = process.env.DOCS_SCREENSHOTS;

describe("/docs in headless Chromium", () => {
  let api;
  let browser;
  before(async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
    api = await startApiOnFreePorts({ localObservability: false });
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Root (as in CI) cannot use Chromium's sandbox.
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    });
  });
  after(async () => {
    await browser?.close();
    await api?.stop();
    cleanupNow();
  });

  /**
   * Opens `pagePath` and checks that it renders every operation of `documentPath` with no request
   * leaving the origin, the document's security scheme preselected with a field for the
   * credential, and the document's own code samples (`sampleText` appears; no generic language).
   */
  async function checkReference(pagePath, documentPath, { sampleText, screenshot }) {
    const doc = await (await fetch(`${api.url}${documentPath}`)).json();
    const operations = Object.values(doc.paths).flatMap((item) => Object.values(item));
    assert.ok(operations.length > 5, "the document has its operations");
    for (const op of operations)
      assert.ok(op["x-codeSamples"]?.length === 2, `${op.operationId} has its code samples`);

    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    const requests = [];
    const pageErrors = [];
    page.on("request", (req) => requests.push(req.url()));
    page.on("pageerror", (err) => pageErrors.push(String(err)));
    const failed = [];
    page.on("response", (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
    // Requests the CSP refuses never reach the network: record the refusals too.
    await page.evaluateOnNewDocument(() => {
      globalThis.__violations = [];
      document.addEventListener("securitypolicyviolation", (e) =>
        globalThis.__violations.push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });

    const res = await page.goto(`${api.url}${pagePath}`, { waitUntil: "load", timeout: 60_000 });
    assert.equal(res.status(), 200);
    const csp = res.headers()["content-security-policy"];
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /connect-src 'self'(;|$)/);

    // Each operation's summary, as the document gives it, appears on the rendered page (Scalar
    // renders operations as they scroll into view: keep scrolling while waiting).
    const summaries = [...new Set(operations.map((op) => op.summary))];
    const shown = (texts) => {
      window.scrollBy(0, 600);
      return texts.every((t) => document.body.innerText.includes(t));
    };
    await page
      .waitForFunction(shown, { timeout: 60_000, polling: 250 }, summaries)
      .catch(async () => {
        const text = await page.evaluate(() => document.body.innerText);
        const missing = summaries.filter((t) => !text.includes(t));
        assert.fail(`the page does not show ${missing.join(" | ")}:\n${text.slice(0, 1500)}`);
      });
    await new Promise((r) => setTimeout(r, 1000)); // anything fired late by the page

    const text = await page.evaluate(() => document.body.innerText);
    // Authentication: the document's scheme is selected, with a field for the credential.
    assert.doesNotMatch(text, /No authentication selected/i);
    assert.ok(
      await page.evaluate(() =>
        [...document.querySelectorAll("input")].some((i) =>
          /token|key/i.test(`${i.placeholder} ${i.getAttribute("aria-label") ?? ""} ${i.id}`),
        ),
      ),
      "a field for the key or token",
    );
    // Code samples: the document's own (curl and the client), none of the generic languages.
    assert.ok(text.includes(sampleText), `the page shows its code sample (${sampleText})`);
    assert.doesNotMatch(text, /require 'uri'|<\?php|import requests/);

    if (SCREENSHOTS) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: path.join(SCREENSHOTS, screenshot) });
    }

    const origin = new URL(api.url).origin;
    const offOrigin = requests.filter(
      (u) => !u.startsWith(`${origin}/`) && !/^(data|blob):/.test(u),
    );
    assert.deepEqual(offOrigin, [], "requests that left the origin");
    assert.ok(
      requests.includes(`${origin}/docs/scalar.js`),
      "the Scalar bundle came from the Worker",
    );
    assert.ok(requests.includes(`${origin}${documentPath}`), "the page read the served document");
    // The CSP refused nothing but Scalar's probe for eval() (the page works without it, and
    // 'unsafe-eval' stays off): no blocked load, no blocked inline script or style.
    const violations = await page.evaluate(() => globalThis.__violations);
    assert.deepEqual(
      violations.filter((v) => v !== "script-src eval"),
      [],
      "CSP violations",
    );
    assert.deepEqual(pageErrors, [], "uncaught errors on the page");
    assert.deepEqual(failed, [], "requests the page made that failed (a missing icon included)");
    await page.close();
  }

  it("/docs renders every operation, Bearer preselected, with curl and client samples, offline", async () => {
    await checkReference("/docs", "/v1/openapi.json", {
      sampleText: "$ANIMAL_STORE_KEY",
      screenshot: "docs.png",
    });
  });

  it("/admin/docs renders the operator API the same way, with no token", async () => {
    await checkReference("/admin/docs", "/admin/v1/openapi.json", {
      sampleText: "$ADMIN_TOKEN",
      screenshot: "admin-docs.png",
    });
  });

  it("serves the pinned bundle as a static asset", async () => {
    const res = await fetch(`${api.url}/docs/scalar.js`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /javascript/);
    assert.ok((await res.arrayBuffer()).byteLength > 1_000_000);
  });
});
