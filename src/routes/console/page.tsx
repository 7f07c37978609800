import type { FC, PropsWithChildren } from "hono/jsx";
import { PLANS } from "../../quota/plans";
import { AUDIT_ACTION_NAMES } from "../../schemas/audit";
import { KEY_LIST_STATES } from "../../schemas/keys";
import { REGION_NAMES, REGIONS } from "../../schemas/region";

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

/** Where a new secret is shown, once, next to the action that made it. */
const SecretBox: FC<{ id: string }> = ({ id }) => (
  <div id={id} class="secret" hidden>
    <p>
      The new secret, shown <strong>once</strong>: store it now.
    </p>
    <code class="secret-value" />
    <button type="button" class="copy-secret">
      Copy
    </button>
  </div>
);

/** A table's header row: one column per name, then `children` (columns that need more than a name). */
const ColumnHeads: FC<PropsWithChildren<{ names: readonly string[] }>> = ({ names, children }) => (
  <thead>
    <tr>
      {names.map((name) => (
        <th scope="col">{name}</th>
      ))}
      {children}
    </tr>
  </thead>
);

/** The usage tables' last column, with what it counts. */
const StrandedHead: FC = () => (
  <th scope="col" title="Permits leased and never reported used: not requests, not billed">
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

/**
 * The operator console's one page, rendered on the server with Hono's JSX. It holds no data:
 * its script (public/admin/console.js) fills it in from the admin API with the token the
 * operator pastes (kept in sessionStorage only). No inline script or style, so the CSP can be `default-src 'self'`.
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
              <Options values={KEY_LIST_STATES} anyLabel="any state" />
            </select>
            <input
              name="q"
              type="search"
              placeholder="name or secret (pet_test_…)"
              aria-label="Search by name or by the start of the secret"
            />
            <input name="ownerId" placeholder="owner id" aria-label="Owner id" />
            <button type="submit">Filter</button>
          </form>
          <table id="key-table">
            <caption class="hint">
              Today: requests counted today against the day quota. Last used: the last UTC day with
              any request.
            </caption>
            <ColumnHeads names={["Name", "Plan", "State", "Today", "Last used", "Owner"]} />
            <tbody />
          </table>
          <p id="no-keys" class="hint" hidden>
            No key matches these filters.
          </p>
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
            <select
              name="region"
              aria-label="Region"
              title="Where the key's quota object is created: near the key's consumer"
            >
              <RegionOptions />
            </select>
            <button type="submit">Create</button>
            <output class="result" />
          </form>
          <SecretBox id="create-secret" />
        </section>

        <section id="detail" hidden>
          <h2 id="detail-title">Key</h2>
          <dl id="detail-fields" />
          <h3>Now</h3>
          <p id="detail-now" />
          <h3 id="usage-heading">Usage</h3>
          <form id="usage-range" class="range" aria-label="Range">
            {[7, 30, 90].map((days) => (
              <label class="choice">
                <input type="radio" name="days" value={String(days)} checked={days === 30} />
                {days} days
              </label>
            ))}
            <button type="button" id="download-key-csv">
              Download CSV
            </button>
          </form>
          <figure id="usage-figure">
            <svg
              id="usage-chart"
              role="img"
              aria-labelledby="usage-summary"
              viewBox="0 0 640 240"
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
            <div class="scroll">
              <table id="usage-table">
                <ColumnHeads
                  names={["Day (UTC)", "Admitted", "Rate limited", "Over quota", "Banned"]}
                >
                  <StrandedHead />
                </ColumnHeads>
                <tbody />
              </table>
            </div>
          </details>

          <h3 data-writes>Actions</h3>
          <p id="no-actions" class="hint" hidden>
            This key is revoked: nothing about it can be changed any more.
          </p>
          <div id="actions" data-writes>
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
                <textarea name="meta" rows={3} spellcheck={false} />
              </label>
            </ActionForm>
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
              <label>
                Region (where its quota object is created, at its first request; an object never
                moves)
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
                Clear expiry
              </button>
              <output class="result" />
            </form>
            <form class="action" data-action="roll">
              <label>
                Old secret keeps working for
                <select name="gracePeriodSeconds">
                  <option value="0">0 (ends now)</option>
                  <option value="3600">1 hour</option>
                  <option value="86400" selected>
                    1 day
                  </option>
                  <option value="604800">7 days</option>
                </select>
              </label>
              <button type="submit">Roll secret</button>
              <output class="result" />
              <SecretBox id="roll-secret" />
            </form>
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
          <h3>Audit trail of this key</h3>
          <ol id="detail-audit" class="audit" />
        </section>

        <section id="day-usage">
          <h2>Usage of one day (invoicing)</h2>
          <form id="day-form">
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
          <div class="scroll">
            <table id="day-table" hidden>
              <ColumnHeads names={["Key", "Plan", "Owner", "Admitted", "Refused"]}>
                <StrandedHead />
              </ColumnHeads>
              <tbody />
            </table>
          </div>
        </section>

        <section id="audit">
          <h2>Audit trail (all keys)</h2>
          <form id="audit-filters">
            <input name="actor" placeholder="actor (token name, system)" aria-label="Actor" />
            <select name="action" aria-label="Action">
              <Options values={AUDIT_ACTION_NAMES} anyLabel="any action" />
            </select>
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
          </form>
          <ol id="audit-list" class="audit" />
        </section>
      </main>

      <dialog id="confirm">
        <form method="dialog">
          <p id="confirm-text" />
          <button type="submit" value="cancel">
            Cancel
          </button>
          <button type="submit" value="confirm" class="danger" id="confirm-button">
            Confirm
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
