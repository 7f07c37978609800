import type { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ApiError, shownPath } from "../lib/errors";
import { errorResponse } from "./error-handler";

const TARGET_NAMES: Record<string, string> = {
  json: "body",
  query: "query",
  param: "path",
  header: "header",
};

/**
 * The rule a query parameter broke when its schema did not get one string: zod's own message
 * ("Invalid input: expected string, received array") would leak its internals. A parameter given
 * more than once arrives as an array, a missing one as undefined.
 */
function describeQueryShape(c: Context, name: string, issue: z.core.$ZodIssue): string | undefined {
  const given = c.req.queries(name)?.length ?? 0;
  if (given > 1) return `must be given once (got ${given} values)`;
  if (given === 0 && issue.code === "invalid_type") return "is required";
  return undefined;
}

/** A body or field that must be a JSON object and is not (null, an array, a string, a number). */
const describeObjectShape = (issue: z.core.$ZodIssue): string | undefined =>
  issue.code === "invalid_type" && issue.expected === "object"
    ? "must be a JSON object"
    : undefined;

/** One readable sentence per zod issue, naming the field or parameter and the rule it broke. */
function describeIssues(error: z.ZodError, target: string, c: Context): string {
  return error.issues
    .map((issue) => {
      if (issue.code === "unrecognized_keys") {
        const where = issue.path.length ? ` in ${shownPath(issue.path)}` : "";
        const what = target === "query" ? "query parameter" : "field";
        return `unknown ${what}${issue.keys.length > 1 ? "s" : ""}${where}: ${issue.keys.join(", ")}`;
      }
      const field = issue.path.length ? shownPath(issue.path) : (TARGET_NAMES[target] ?? target);
      const shape =
        target === "query" && issue.path.length === 1
          ? describeQueryShape(c, String(issue.path[0]), issue)
          : describeObjectShape(issue);
      return `${field}: ${shape ?? issue.message}`;
    })
    .join("; ");
}

/** The defaultHook of every OpenAPIHono app: validation failures become 400 Error bodies. */
export function validationHook(
  result: { success: true } | { success: false; error: z.ZodError; target: string },
  c: Context,
): Response | undefined {
  if (result.success) return undefined;
  return errorResponse(
    c,
    new ApiError("invalid_request", describeIssues(result.error, result.target, c)),
  );
}
