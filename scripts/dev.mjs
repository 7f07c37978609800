#!/usr/bin/env node
// @ts-check
// `npm run dev`: apply local D1 migrations, make sure .dev.vars exists, then run `wrangler dev`.
// Extra arguments pass through (`npm run dev -- --port 9000`). State persists under .wrangler/.
import { runLocalDev } from "./lib/local-dev.mjs";

runLocalDev({ args: process.argv.slice(2) });
