import { z } from 'zod';

/** A value that survives a JSON round trip unchanged; everything the store keeps in JSON columns is one. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export const JsonSchema: z.ZodType<Json> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(JsonSchema), z.record(z.string(), JsonSchema)]),
);

/**
 * A typed value of plain data (objects, arrays, strings, numbers, booleans, null; optional fields
 * left out) as the `Json` an entry body or error detail is stored as. TypeScript cannot see that an
 * interface has no methods, so the one cast lives here rather than at every write.
 */
export const plainJson = <T>(value: T): Json => value as unknown as Json;
