import { z } from "@hono/zod-openapi";
import { oneOfError } from "./common";

/**
 * The regions a key's quota object can be placed in: Cloudflare's Durable Object location hints,
 * with what each covers. `satisfies` holds the list to the installed workers-types, both ways: a
 * hint added there and missing here, or one here that is not a hint, fails the typecheck.
 */
export const REGION_NAMES = {
  wnam: "Western North America",
  enam: "Eastern North America",
  sam: "South America",
  weur: "Western Europe",
  eeur: "Eastern Europe",
  apac: "Asia-Pacific",
  "apac-ne": "Northeast Asia-Pacific",
  "apac-se": "Southeast Asia-Pacific",
  oc: "Oceania",
  afr: "Africa",
  me: "Middle East",
} as const satisfies Record<DurableObjectLocationHint, string>;

export type Region = keyof typeof REGION_NAMES;

export const REGIONS = Object.keys(REGION_NAMES) as [Region, ...Region[]];

export const isRegion = (value: unknown): value is Region =>
  typeof value === "string" && Object.hasOwn(REGION_NAMES, value);

export const RegionSchema = z.enum(REGIONS, oneOfError(REGIONS)).openapi("Region", {
  description: `Where the key's quota object is created: a Durable Object location hint (${REGIONS.map((r) => `${r}: ${REGION_NAMES[r]}`).join("; ")}). It applies when the object is created, at the key's first request; an object never moves.`,
});
