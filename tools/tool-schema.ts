import { z } from 'zod';
import type { AnyTool } from './tool';

/** A tool as the Chat Completions API advertises it. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/**
 * A tool's zod schema never changes, and converting it is the costliest part of building a
 * request (the context planner builds one per cut it tries): converted once per tool object.
 */
const parametersOf = new WeakMap<AnyTool, Record<string, unknown>>();

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * The model's view of a tool, derived from its zod schema (inputs as the model must send them).
 * `parameters` is shared between calls and frozen: copy it to change it.
 */
export function toolSchema(tool: AnyTool): ChatTool {
  let parameters = parametersOf.get(tool);
  if (!parameters) {
    parameters = z.toJSONSchema(tool.input, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    delete parameters.$schema;
    parametersOf.set(tool, deepFreeze(parameters));
  }
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
}
