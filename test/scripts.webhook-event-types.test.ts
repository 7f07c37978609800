/// <reference types="vite/client" />
// The operator scripts name the webhook event types an endpoint can subscribe to: the keys CLI in
// its usage, for a person reading `--help`, and the local receiver (`npm run webhooks:listen`) in
// the list it subscribes to by default. The scripts run on Node without the Worker's TypeScript, so
// they write the list out; this ties both to the API's closed list, so a new event type cannot be
// added to the API while the scripts go on naming the old ones.
import { describe, expect, it } from "vitest";
import cli from "../scripts/keys.mjs?raw";
import listener from "../scripts/webhooks-listen.mjs?raw";
import { WEBHOOK_EVENT_TYPES } from "../src/schemas/webhooks";

describe("npm run keys -- --help: webhook event types", () => {
  it("lists exactly the API's event types, in its order", () => {
    const listed = /^ {2}TYPE: ([\s\S]*?)\n(?! {8})/m.exec(cli)?.[1];
    expect(listed, "a `  TYPE: …` paragraph in the usage").toBeDefined();
    expect(listed?.split(/,\s*/).map((type) => type.trim())).toEqual([...WEBHOOK_EVENT_TYPES]);
  });
});

describe("npm run webhooks:listen: the events it subscribes to by default", () => {
  it("are exactly the API's event types, in its order", () => {
    const listed = /^const ALL_EVENTS = \[([\s\S]*?)\];/m.exec(listener)?.[1];
    expect(listed, "a `const ALL_EVENTS = [...]` list").toBeDefined();
    expect(JSON.parse(`[${listed?.replace(/,\s*$/, "")}]`)).toEqual([...WEBHOOK_EVENT_TYPES]);
  });
});
