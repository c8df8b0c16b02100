/**
 * Tool definitions: what the model may call, with its input schema, replay policy, output caps
 * and how it runs against a sandbox. `builtinTools` is the default set of an agent run.
 */
import { edit } from './edit';
import { exec } from './exec';
import { listFiles } from './list-files';
import { readFile } from './read-file';
import { search } from './search';
import { snapshot } from './snapshot';
import type { AnyTool } from './tool';
import { writeFile } from './write-file';

export { exec, readFile, listFiles, search, writeFile, edit, snapshot };
export { describeExec, type ExecInput } from './exec';
export type { ReadFileInput } from './read-file';
export type { ListFilesInput } from './list-files';
export type { SearchInput } from './search';
export type { WriteFileInput } from './write-file';
export type { EditInput } from './edit';
export type { SnapshotInput } from './snapshot';
export { capText } from './output-cap';
export { sha256 } from './file-digest';
export { toolSchema, type ChatTool } from './tool-schema';
export { resolveFlag, type ToolDefinition, type AnyTool, type ToolSandbox, type ToolRunContext, type ToolOutput, type ToolPlan, type ToolVerdict } from './tool';

/** Every built-in tool, by the name the model calls it. */
export const builtinTools: readonly AnyTool[] = [exec, readFile, listFiles, search, writeFile, edit];
/** Tools every host registers (so any host can settle their calls) but offers a model only on request. */
export const hostTools: readonly AnyTool[] = [snapshot];
/** What a tool's failure proves about its effect (see `ToolDefinition.run`). */
export { notSent, rejected, withDelivery, httpAnswerError, classifyFetchError, type Delivery } from '../host/kernel';
