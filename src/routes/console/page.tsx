import type { FC, PropsWithChildren } from "hono/jsx";
import { PLANS } from "../../quota/plans";
import { AUDIT_ACTION_NAMES } from "../../schemas/audit";
import { KEY_LIST_STATES, SHOWN_PREFIX_LENGTH } from "../../schemas/keys";
import { REGION_NAMES, REGIONS } from "../../schemas/region";
import { WEBHOOK_EVENT_TYPES } from "../../schemas/webhooks";
import { CONSOLE_PAGE_ASSET } from "./routes";

/** A select's options: `values`, after an empty "any" choice when `anyLabel` names one. */
const Options: FC<{ values: readonly string[]; anyLabel?: string }> = ({ values, anyLabel }) => (
  <>
    {anyLabel !== undefined && <option value="">{anyLabel}</option>}
    {values.map((v) => (
      <option value={v}>{v}</option>
    ))}
  </>
);

/** The regions a key's quota object can be created in, after "no region" (near its first request). */
const RegionOptions: FC = () => (
  <>
    <option value="">region: near its first request</option>
    {REGIONS.map((r) => (
      <option value={r}>
        {r} — {REGION_NAMES[r]}
      </option>
    ))}
  </>
);

/** How long an old secret keeps working after a roll (a key's, or a webhook endpoint's). */
const GraceSelect: FC<{ label: string }> = ({ label }) => (
  <label>
    {label}
    <select name="gracePeriodSeconds">
      <option value="0">0 (ends now)</option>
      <option value="3600">1 hour</option>
      <option value="86400" selected>
        1 day
      </option>
      <option value="604800">7 days</option>
    </select>
  </label>
);

/** A checkbox per webhook event type, all named eventTypes. */
const EventTypeBoxes: FC = () => (
  <fieldset class="checks">
    <legend>Event types</legend>
    {WEBHOOK_EVENT_TYPES.map((type) => (
      <label>
        <input type="checkbox" name="eventTypes" value={type} /> {type}
      </label>
    ))}
  </fieldset>
);

/** Where a new secret is shown, once, next to what made it. */
const SecretBox: FC<{ id: string }> = ({ id }) => (
  <div id={id} class="secret" hidden>
    <p>
      The new secret, shown <strong>once</strong>: store it now.
    </p>
    <div class="secret-row">
      <code class="secret-value" />
      <button type="button" class="copy-secret small">
        Copy
      </button>
    </div>
  </div>
);

/** A table's header row: one column per name (`numeric` ones right-aligned), then `children`. */
const ColumnHeads: FC<
  PropsWithChildren<{ names: readonly string[]; numeric?: readonly string[] }>
> = ({ names, numeric = [], children }) => (
  <thead>
    <tr>
      {names.map((name) => (
        <th scope="col" class={numeric.includes(name) ? "number" : undefined}>
          {name}
        </th>
      ))}
      {children}
    </tr>
  </thead>
);

/** The usage tables' last column, with what it counts. */
const StrandedHead: FC = () => (
  <th
    scope="col"
    class="number"
    title="Permits leased and never reported used: not requests, not billed"
  >
    Stranded
  </th>
);

/** One change to the shown key: its fields (`children`), the button that submits it, its result. */
const ActionForm: FC<PropsWithChildren<{ action: string; submitLabel: string }>> = ({
  action,
  submitLabel,
  children,
}) => (
  <form class="action" data-action={action}>
    {children}
    <button type="submit">{submitLabel}</button>
    <output class="result" />
  </form>
);

/** What a list shows when it has nothing to show: what that means, and what to do. */
const Empty: FC<PropsWithChildren<{ id: string; title: string }>> = ({ id, title, children }) => (
  <div id={id} class="empty" hidden>
    <strong>{title}</strong>
    {children}
  </div>
);

/**
 * The foot of a paged list: how many are shown (`<list>-count`) and the button that loads the
 * next page (`more-<list>`), both filled in by the console's script.
 */
const ListFoot: FC<{ list: string }> = ({ list }) => (
  <div class="table-foot" id={`${list}-foot`} hidden>
    <span id={`${list}-count`} />
    <button type="button" id={`more-${list}`} class="small" hidden>
      Show more
    </button>
  </div>
);

/**
 * The operator console's one page, rendered on the server with Hono's JSX, for every console
 * URL: its script (public/admin/console.js) shows the view the URL names (keys, a key, a new
 * key, usage, audit, webhook endpoints, one, a new one) and fills it in from the admin API with the token the operator pastes (kept
 * in sessionStorage only). No inline script or style, so the CSP can be `default-src 'self'`.
 */
const ConsolePage: FC = () => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="referrer" content="no-referrer" />
      <meta name="color-scheme" content="light dark" />
      <title>Animal Store — operator console</title>
      <link rel="icon" href="/admin/favicon.svg" />
      <link rel="stylesheet" href="/admin/console.css" />
      <script src="/admin/console.js" defer />
    </head>
    <body>
      <header class="topbar">
        <a class="brand" href="/">
          <img src="/admin/favicon.svg" alt="" width="20" height="20" />
          Animal Store <small>console</small>
        </a>
        <nav class="nav" id="nav" aria-label="Console" hidden>
          <a href="/admin/keys" data-nav="keys">
            Keys
          </a>
          <a href="/admin/usage" data-nav="usage">
            Usage
          </a>
          <a href="/admin/audit" data-nav="audit">
            Audit
          </a>
          <a href="/admin/webhooks" data-nav="webhooks">
            Webhooks
          </a>
        </nav>
        <div class="session" id="session" hidden>
          <span id="whoami" />
          <button type="button" id="logout" class="small">
            Log out
          </button>
        </div>
      </header>

      <main class="page">
        <section id="login" class="card narrow">
          <h1>Log in</h1>
          <form id="login-form" class="view">
            <label>
              Admin token
              <input type="password" id="token" name="token" autocomplete="off" required />
            </label>
            <button type="submit" class="primary">
              Log in
            </button>
            <p class="hint">
              The token stays in this tab's sessionStorage: never in a URL or a cookie, and it is
              gone when the tab closes.
            </p>
          </form>
        </section>

        <div id="app" class="view" hidden>
          <p id="message" role="status" aria-live="polite" />

          <section id="view-keys" class="view" data-view="keys" hidden>
            <div class="view-head">
              <div>
                <h1>Keys</h1>
                <p id="keys-as-of">Today: requests counted today (UTC) against the day quota.</p>
              </div>
              <a href="/admin/keys/new" class="button primary" data-writes>
                New key
              </a>
            </div>
            <form id="filters" class="toolbar">
              <input
                name="q"
                type="search"
                data-shown-prefix={SHOWN_PREFIX_LENGTH}
                placeholder="Name, or the start of a secret (pet_test_…)"
                aria-label="Search by name or by the start of the secret"
              />
              <select name="plan" aria-label="Plan">
                <Options values={PLANS} anyLabel="Any plan" />
              </select>
              <select name="state" aria-label="State">
                <Options values={KEY_LIST_STATES} anyLabel="Any state" />
              </select>
              <input name="ownerId" placeholder="Owner id" aria-label="Owner id" />
              <button type="submit">Filter</button>
              <a href="/admin/keys" class="button ghost" id="clear-filters" hidden>
                Clear
              </a>
            </form>
            <div class="card flush">
              <div class="table-scroll">
                <table id="key-table">
                  <ColumnHeads names={["Name", "Plan", "State", "Today", "Last used", "Owner"]} />
                  <tbody />
                </table>
              </div>
              <Empty id="no-keys" title="No key matches these filters">
                <p>Change or clear the filters to see more keys.</p>
              </Empty>
              <Empty id="first-key" title="No keys yet">
                <p>An API key lets a consumer call /v1. Create the first one.</p>
                <a href="/admin/keys/new" class="button primary" data-writes>
                  New key
                </a>
              </Empty>
              <ListFoot list="keys" />
            </div>
          </section>

          <section id="view-new" class="view" data-view="new" hidden>
            <nav class="crumbs" aria-label="Breadcrumb">
              <a href="/admin/keys">Keys</a> / New key
            </nav>
            <h1>New key</h1>
            <p class="hint" data-read-only-note>
              This token is read-only: it cannot create keys.
            </p>
            <form id="create-form" class="card form-grid" data-writes>
              <label>
                Name
                <input name="name" required maxlength={200} placeholder="acme-production" />
              </label>
              <label>
                Plan
                <select name="plan">
                  <Options values={PLANS} />
                </select>
              </label>
              <label class="enterprise-only">
                Per minute (enterprise)
                <input name="perMinute" type="number" min="1" />
              </label>
              <label class="enterprise-only">
                Per day (enterprise)
                <input name="perDay" type="number" min="1" />
              </label>
              <label>
                Owner id (optional)
                <input name="ownerId" placeholder="acct_42" />
              </label>
              <label title="Where the key's quota object is created: near the key's consumer">
                Region
                <select name="region">
                  <RegionOptions />
                </select>
              </label>
              <div class="form-actions">
                <button type="submit" class="primary">
                  Create key
                </button>
                <a href="/admin/keys" class="button ghost">
                  Cancel
                </a>
                <output class="result" />
              </div>
            </form>
          </section>

          <section id="detail" class="view" data-view="key" hidden>
            <nav class="crumbs" aria-label="Breadcrumb">
              <a href="/admin/keys">Keys</a> / <span id="crumb-key" />
            </nav>
            <div>
              <div class="key-head">
                <h1 id="detail-title">Key</h1>
                <span id="detail-badges" class="key-head" />
              </div>
              <div class="key-sub" id="detail-sub" />
            </div>
            <SecretBox id="create-secret" />
            <dl class="stats" id="detail-now" />

            <div class="key-columns">
              <section class="card" aria-labelledby="usage-heading">
                <div class="card-head">
                  <h2 id="usage-heading">Usage</h2>
                  <form id="usage-range" class="range" aria-label="Range">
                    <div class="segmented">
                      {[7, 30, 90].map((days) => (
                        <label>
                          <input
                            type="radio"
                            name="days"
                            value={String(days)}
                            checked={days === 30}
                          />
                          <span>{days} days</span>
                        </label>
                      ))}
                    </div>
                    <button type="button" id="download-key-csv" class="small">
                      CSV
                    </button>
                  </form>
                </div>
                <figure id="usage-figure">
                  <svg
                    id="usage-chart"
                    role="img"
                    aria-labelledby="usage-summary"
                    viewBox="0 0 640 220"
                    preserveAspectRatio="none"
                  />
                  <ul class="legend" id="usage-legend">
                    <li>
                      <span class="swatch admitted" /> Admitted
                    </li>
                    <li>
                      <span class="swatch refused" /> Refused (rate limited, over quota, banned)
                    </li>
                  </ul>
                  <figcaption id="usage-summary" />
                </figure>
                <details id="usage-table-box">
                  <summary>The same numbers as a table</summary>
                  <div class="table-scroll">
                    <table id="usage-table">
                      <ColumnHeads
                        names={["Day (UTC)", "Admitted", "Rate limited", "Over quota", "Banned"]}
                        numeric={["Admitted", "Rate limited", "Over quota", "Banned"]}
                      >
                        <StrandedHead />
                      </ColumnHeads>
                      <tbody />
                    </table>
                  </div>
                </details>
              </section>
              <section class="card" aria-labelledby="fields-heading">
                <h2 id="fields-heading">Details</h2>
                <dl id="detail-fields" class="fields" />
              </section>
            </div>
            <section class="card" aria-labelledby="actions-heading" data-writes>
              <h2 id="actions-heading">Actions</h2>
              <p id="no-actions" class="hint" hidden>
                This key is revoked: nothing about it can be changed any more.
              </p>
              <div id="actions">
                <div class="action-group">
                  <h3>Name and owner</h3>
                  <ActionForm action="rename" submitLabel="Rename">
                    <label>
                      Name
                      <input name="name" required maxlength={200} />
                    </label>
                  </ActionForm>
                  <ActionForm action="owner" submitLabel="Save owner">
                    <label>
                      Owner id
                      <input name="ownerId" maxlength={200} placeholder="none" />
                    </label>
                  </ActionForm>
                  <ActionForm action="meta" submitLabel="Save metadata">
                    <label>
                      Metadata (a JSON object; empty clears it)
                      <textarea name="meta" rows={2} spellcheck={false} />
                    </label>
                  </ActionForm>
                </div>
                <div class="action-group">
                  <h3>Plan and placement</h3>
                  <ActionForm action="plan" submitLabel="Change plan">
                    <label>
                      Plan
                      <select name="plan">
                        <Options values={PLANS} />
                      </select>
                    </label>
                    <label class="enterprise-only">
                      Per minute
                      <input name="perMinute" type="number" min="1" />
                    </label>
                    <label class="enterprise-only">
                      Per day
                      <input name="perDay" type="number" min="1" />
                    </label>
                  </ActionForm>
                  <ActionForm action="region" submitLabel="Save region">
                    <label title="Where its quota object is created, at its first request; an object never moves">
                      Region (used at its first request)
                      <select name="region">
                        <RegionOptions />
                      </select>
                    </label>
                  </ActionForm>
                  <form class="action" data-action="expiry">
                    <label>
                      Expires (your local time)
                      <input name="expiresAt" type="datetime-local" />
                    </label>
                    <button type="submit">Set expiry</button>
                    <button type="button" data-clear-expiry>
                      Clear
                    </button>
                    <output class="result" />
                  </form>
                </div>
                <div class="action-group">
                  <h3>Secret</h3>
                  <form class="action" data-action="roll">
                    <GraceSelect label="Old secret keeps working for" />
                    <button type="submit">Roll secret</button>
                    <output class="result" />
                  </form>
                  <SecretBox id="roll-secret" />
                </div>
                <div class="action-group">
                  <h3>Access</h3>
                  <form class="action" data-action="state">
                    <button type="submit" id="toggle-enabled">
                      Disable…
                    </button>
                    <button type="button" data-unban>
                      Unban
                    </button>
                    <button type="button" data-action="revoke" class="danger">
                      Revoke…
                    </button>
                    <output class="result" />
                  </form>
                </div>
              </div>
            </section>
            <section class="card" aria-labelledby="detail-audit-heading">
              <div class="card-head">
                <h2 id="detail-audit-heading">Audit trail</h2>
                <a id="detail-audit-all" href="/admin/audit">
                  All entries
                </a>
              </div>
              <ol id="detail-audit" class="audit" />
            </section>
          </section>

          <section id="view-usage" class="view" data-view="usage" hidden>
            <div class="view-head">
              <div>
                <h1>Usage</h1>
                <p>Every key's totals of one UTC day, for invoicing.</p>
              </div>
            </div>
            <form id="day-form" class="toolbar">
              <label>
                Day (UTC)
                <input name="day" type="date" required />
              </label>
              <button type="submit">Show</button>
              <button type="button" id="download-day-csv">
                Download CSV
              </button>
              <output class="result" />
            </form>
            <p id="day-summary" />
            <div class="card flush">
              <div class="table-scroll">
                <table id="day-table" hidden>
                  <ColumnHeads
                    names={["Key", "Plan", "Owner", "Admitted", "Refused"]}
                    numeric={["Admitted", "Refused"]}
                  >
                    <StrandedHead />
                  </ColumnHeads>
                  <tbody />
                  <tfoot />
                </table>
              </div>
              <Empty id="no-day-usage" title="No keys on this day">
                <p>No key existed yet on this day, so there is nothing to invoice.</p>
              </Empty>
            </div>
          </section>

          <section id="audit" class="view" data-view="audit" hidden>
            <div class="view-head">
              <div>
                <h1>Audit trail</h1>
                <p>Every admin write and automatic ban, newest first.</p>
              </div>
            </div>
            <form id="audit-filters" class="toolbar">
              <label>
                Key id
                <input name="keyId" placeholder="key_…" />
              </label>
              <label>
                Endpoint id
                <input name="endpointId" placeholder="whe_…" />
              </label>
              <label>
                Actor
                <input name="actor" placeholder="token name, system" />
              </label>
              <label>
                Action
                <select name="action">
                  <Options values={AUDIT_ACTION_NAMES} anyLabel="Any action" />
                </select>
              </label>
              <label>
                From (UTC day)
                <input name="from" type="date" />
              </label>
              <label>
                To
                <input name="to" type="date" />
              </label>
              <button type="submit" id="load-audit">
                Filter
              </button>
              <a href="/admin/audit" class="button ghost" id="clear-audit-filters" hidden>
                Clear
              </a>
            </form>
            <div class="card flush">
              <ol id="audit-list" class="audit padded" />
              <Empty id="no-audit" title="No entries">
                <p>Nothing recorded matches these filters.</p>
              </Empty>
              <ListFoot list="audit" />
            </div>
          </section>

          <section id="view-hooks" class="view" data-view="hooks" hidden>
            <div class="view-head">
              <div>
                <h1>Webhooks</h1>
                <p>Endpoints that receive signed usage alerts and key events.</p>
              </div>
              <a href="/admin/webhooks/new" class="button primary" data-writes>
                New endpoint
              </a>
            </div>
            <form id="hook-filters" class="toolbar">
              <input name="ownerId" placeholder="Owner id" aria-label="Owner id" />
              <button type="submit">Filter</button>
              <a href="/admin/webhooks" class="button ghost" id="clear-hook-filters" hidden>
                Clear
              </a>
            </form>
            <div class="card flush">
              <div class="table-scroll">
                <table id="hook-table">
                  <ColumnHeads names={["Endpoint", "Owner", "Events", "State"]} />
                  <tbody />
                </table>
              </div>
              <Empty id="no-hooks" title="No endpoint for this owner">
                <p>Endpoints for every owner are listed without the filter.</p>
              </Empty>
              <Empty id="first-hook" title="No webhook endpoints yet">
                <p>
                  An endpoint is a URL of yours that receives usage alerts (80 % and 100 % of a
                  key's day quota) and key events, signed with its own secret.
                </p>
                <a href="/admin/webhooks/new" class="button primary" data-writes>
                  New endpoint
                </a>
              </Empty>
              <ListFoot list="hooks" />
            </div>
          </section>

          <section id="view-hook-new" class="view" data-view="hook-new" hidden>
            <nav class="crumbs" aria-label="Breadcrumb">
              <a href="/admin/webhooks">Webhooks</a> / New endpoint
            </nav>
            <h1>New endpoint</h1>
            <p class="hint" data-read-only-note>
              This token is read-only: it cannot create endpoints.
            </p>
            <form id="hook-form" class="card form-grid" data-writes>
              <label class="wide">
                URL (https, public host)
                <input
                  name="url"
                  type="url"
                  required
                  maxlength={2048}
                  placeholder="https://hooks.example.com/animal-store"
                />
              </label>
              <fieldset class="checks owner-choice">
                <legend>Sends events about the keys of</legend>
                <label>
                  <input type="radio" name="ownerScope" value="one" /> one owner
                </label>
                <input
                  name="ownerId"
                  maxlength={200}
                  placeholder="acct_42"
                  aria-label="Owner id"
                  disabled
                />
                <label>
                  <input type="radio" name="ownerScope" value="every" /> every owner
                </label>
              </fieldset>
              <label>
                Description (optional)
                <input name="description" maxlength={500} />
              </label>
              <EventTypeBoxes />
              <div class="form-actions">
                <button type="submit" class="primary">
                  Create endpoint
                </button>
                <a href="/admin/webhooks" class="button ghost">
                  Cancel
                </a>
                <output class="result" />
              </div>
            </form>
          </section>

          <section id="hook" class="view" data-view="hook" hidden>
            <nav class="crumbs" aria-label="Breadcrumb">
              <a href="/admin/webhooks">Webhooks</a> / <span id="crumb-hook" />
            </nav>
            <div class="key-head">
              <h1 id="hook-title" class="mono">
                Endpoint
              </h1>
              <span id="hook-badges" class="key-head" />
            </div>
            <SecretBox id="hook-created-secret" />
            <div class="key-columns">
              <section class="card" aria-labelledby="hook-fields-heading">
                <h2 id="hook-fields-heading">Details</h2>
                <dl id="hook-fields" class="fields" />
              </section>
              <section class="card action-group" aria-labelledby="hook-actions-heading" data-writes>
                <h2 id="hook-actions-heading">Actions</h2>
                <form class="action" data-hook-action="events">
                  <EventTypeBoxes />
                  <button type="submit">Save event types</button>
                  <output class="result" />
                </form>
                <form class="action" data-hook-action="roll">
                  <GraceSelect label="Old signing secret also signs for" />
                  <button type="submit">Roll secret</button>
                  <output class="result" />
                </form>
                <SecretBox id="hook-rolled-secret" />
                <form class="action" data-hook-action="state">
                  <button type="submit" id="hook-toggle">
                    Disable…
                  </button>
                  <button type="button" data-hook-delete class="danger">
                    Delete…
                  </button>
                  <output class="result" />
                </form>
              </section>
            </div>
            <section class="card" aria-labelledby="deliveries-heading">
              <div class="card-head">
                <h2 id="deliveries-heading">Deliveries</h2>
                <div class="toolbar">
                  <button type="button" id="refresh-deliveries" class="small">
                    Refresh
                  </button>
                  <button type="button" id="send-test" class="small" data-writes>
                    Send test event
                  </button>
                </div>
              </div>
              <output id="deliveries-result" class="result" />
              <div class="table-scroll">
                <table id="delivery-table">
                  <ColumnHeads
                    names={["Event", "Status", "Attempts", "Response", "Latency", "Queued"]}
                    numeric={["Attempts", "Latency"]}
                  >
                    <th scope="col" data-writes />
                  </ColumnHeads>
                  <tbody />
                </table>
              </div>
              <Empty id="no-deliveries" title="No deliveries yet">
                <p>Each event sent to this endpoint is logged here, newest first.</p>
              </Empty>
              <ListFoot list="deliveries" />
            </section>
            <section class="card" aria-labelledby="hook-audit-heading">
              <div class="card-head">
                <h2 id="hook-audit-heading">Audit trail</h2>
                <a id="hook-audit-all" href="/admin/audit">
                  All entries
                </a>
              </div>
              <ol id="hook-audit" class="audit" />
            </section>
          </section>

          <section id="view-missing" class="view" data-view="missing" hidden>
            <div class="card empty">
              <strong>No such page</strong>
              <p id="missing-text">This address names nothing in the console.</p>
              <a href="/admin/keys" class="button">
                Go to the keys
              </a>
            </div>
          </section>
        </div>
      </main>

      <dialog id="confirm">
        <form method="dialog">
          <p id="confirm-text" />
          <div class="dialog-buttons">
            <button type="submit" value="cancel">
              Cancel
            </button>
            <button type="submit" value="confirm" class="danger" id="confirm-button">
              Confirm
            </button>
          </div>
        </form>
      </dialog>
    </body>
  </html>
);

/** The page as an HTML document; it is the same for everyone, so it is rendered once. */
export function renderConsolePage(): string {
  return `<!DOCTYPE html>${(<ConsolePage />).toString()}`;
}

/**
 * Build time only: the page, and the URL path the static assets serve it at for the Worker to
 * read (routes.ts). scripts/lib/console-page.mjs bundles this module for Node and writes the page
 * among the static assets; the Worker never imports it, so the page and Hono's JSX renderer stay
 * out of its bundle.
 */
export const consolePageAsset = () => ({ path: CONSOLE_PAGE_ASSET, text: renderConsolePage() });
