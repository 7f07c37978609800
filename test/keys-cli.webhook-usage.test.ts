/// <reference types="vite/client" />
// The operator CLI's usage names the webhook event types an endpoint can subscribe to. The list is
// written out for a person reading `--help`; this ties it to the API's closed list, so a new event
// type cannot be added to the API while the CLI's help goes on naming the old ones.
import { describe, expect, it } from "vitest";
import cli from "../scripts/keys.mjs?raw";
import { WEBHOOK_EVENT_TYPES } from "../src/schemas/webhooks";

describe("npm run keys -- --help: webhook event types", () => {
  it("lists exactly the API's event types, in its order", () => {
    const listed = /^ {2}TYPE: ([\s\S]*?)\n(?! {8})/m.exec(cli)?.[1];
    expect(listed, "a `  TYPE: …` paragraph in the usage").toBeDefined();
    expect(listed?.split(/,\s*/).map((type) => type.trim())).toEqual([...WEBHOOK_EVENT_TYPES]);
  });
});
