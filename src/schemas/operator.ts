import { z } from "@hono/zod-openapi";

/** The admin token a request came with, as the console needs it to know which actions to offer. */
export const AdminIdentitySchema = z
  .object({
    name: z.string().openapi({
      description: "The token's name: the actor the audit trail records for its writes",
      example: "alice",
    }),
    access: z.enum(["full", "read"]).openapi({
      description:
        'What the token may do: "full" (every operation) or "read" (key views, usage and the audit trail; writes answer 403)',
    }),
  })
  .openapi("AdminIdentity");
