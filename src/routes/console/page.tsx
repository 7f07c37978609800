import type { FC } from "hono/jsx";
import { PLANS } from "../../quota/plans";
import { KEY_STATE_NAMES } from "../../schemas/keys";

/** A select's options: `values`, after an empty "any" choice when `anyLabel` names one. */
const Options: FC<{ values: readonly string[]; anyLabel?: string }> = ({ values, anyLabel }) => (
  <>
    {anyLabel !== undefined && <option value="">{anyLabel}</option>}
    {values.map((v) => (
      <option value={v}>{v}</option>
    ))}
  </>
);

/**
 * The operator console's one page, rendered on the server with Hono's JSX. It holds no data:
 * console.client.js fills it in from the admin API with the token the operator pastes (kept in
 * sessionStorage only). No inline script or style, so the CSP can be `default-src 'self'`.
 */
const ConsolePage: FC = () => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="referrer" content="no-referrer" />
      <title>Animal Store — operator console</title>
      <link rel="icon" href="/admin/favicon.svg" />
      <link rel="stylesheet" href="/admin/console.css" />
      <script src="/admin/console.js" defer />
    </head>
    <body>
      <header>
        <h1>Animal Store operator console</h1>
        <button type="button" id="logout" hidden>
          Log out
        </button>
      </header>

      <section id="login">
        <h2>Log in</h2>
        <form id="login-form">
          <label>
            Admin token
            <input type="password" id="token" name="token" autocomplete="off" required />
          </label>
          <button type="submit">Log in</button>
          <p class="hint">
            The token stays in this tab's sessionStorage: never in a URL or a cookie, and it is gone
            when the tab closes.
          </p>
        </form>
      </section>

      <main id="app" hidden>
        <p id="message" role="status" aria-live="polite" />

        <section id="keys">
          <h2>Keys</h2>
          <form id="filters">
            <select name="plan" aria-label="Plan">
              <Options values={PLANS} anyLabel="any plan" />
            </select>
            <select name="state" aria-label="State">
              <Options values={KEY_STATE_NAMES} anyLabel="any state" />
            </select>
            <input name="q" placeholder="name starts with…" aria-label="Name prefix" />
            <input name="ownerId" placeholder="owner id" aria-label="Owner id" />
            <button type="submit">Filter</button>
          </form>
          <table id="key-table">
            <thead>
              <tr>
                <th>Name</th>
                <th>Id</th>
                <th>Plan</th>
                <th>State</th>
                <th>Owner</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody />
          </table>
          <button type="button" id="more-keys" hidden>
            More
          </button>
        </section>

        <section id="create" data-writes>
          <h2>Create a key</h2>
          <form id="create-form">
            <input name="name" placeholder="name" aria-label="Name" required maxlength={200} />
            <select name="plan" aria-label="Plan">
              <Options values={PLANS} />
            </select>
            <input
              name="perMinute"
              type="number"
              min="1"
              placeholder="per minute (enterprise)"
              aria-label="Per minute"
            />
            <input
              name="perDay"
              type="number"
              min="1"
              placeholder="per day (enterprise)"
              aria-label="Per day"
            />
            <input name="ownerId" placeholder="owner id (optional)" aria-label="Owner id" />
            <button type="submit">Create</button>
          </form>
          <div id="secret" hidden>
            <p>
              The new secret, shown <strong>once</strong>: store it now.
            </p>
            <code id="secret-value" />
            <button type="button" id="copy-secret">
              Copy
            </button>
          </div>
        </section>

        <section id="detail" hidden>
          <h2 id="detail-title">Key</h2>
          <dl id="detail-fields" />
          <h3>Now</h3>
          <p id="detail-now" />
          <h3>Last 30 days</h3>
          <figure>
            <svg id="usage-chart" role="img" aria-label="Requests per day" viewBox="0 0 300 120" />
            <figcaption id="usage-summary" />
          </figure>
          <h3 data-writes>Actions</h3>
          <div id="actions" data-writes>
            <select id="new-plan" aria-label="New plan">
              <Options values={PLANS} />
            </select>
            <button type="button" data-action="plan">
              Change plan
            </button>
            <button type="button" data-action="toggle" id="toggle-enabled">
              Disable
            </button>
            <button type="button" data-action="roll">
              Roll secret
            </button>
            <button type="button" data-action="unban">
              Unban
            </button>
            <button type="button" data-action="revoke" class="danger">
              Revoke…
            </button>
          </div>
          <h3>Audit trail</h3>
          <ol id="detail-audit" />
        </section>

        <section id="audit">
          <h2>Audit trail (all keys)</h2>
          <button type="button" id="load-audit">
            Refresh
          </button>
          <ol id="audit-list" />
        </section>
      </main>

      <dialog id="confirm-revoke">
        <form method="dialog">
          <p>
            Revoke <strong id="revoke-name" />? This is final: the key is refused from its next
            request and cannot be enabled again.
          </p>
          <button type="submit" value="cancel">
            Cancel
          </button>
          <button type="submit" value="revoke" class="danger" id="confirm-revoke-button">
            Revoke
          </button>
        </form>
      </dialog>
    </body>
  </html>
);

/** The page as an HTML document; it is the same for everyone, so it is rendered once. */
export function renderConsolePage(): string {
  return `<!DOCTYPE html>${(<ConsolePage />).toString()}`;
}
