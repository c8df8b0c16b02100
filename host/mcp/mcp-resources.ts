import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ErrorCode, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, McpError, ReadResourceRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Berth } from '../api/berth';
import type { McpSessions } from './mcp-session';
import { reportProgress } from './call-progress';
import { setCheckedHandler } from './checked-handler';
import { WireError } from './wire-error';

/** A session id of at most 256 characters, as a tools/call's `session` (argument-limits.ts). */
const RESOURCE_URI = /^berth:\/\/session\/([A-Za-z0-9_]{1,256})\/(record|workspace)$/;
/** A URI as an error names it: a client's 1 MB URI came back whole. */
const shown = (u: string) => (u.length > 200 ? `${JSON.stringify(u.slice(0, 200))}... (${u.length} characters)` : u);
const uri = (sessionId: string, what: 'record' | 'workspace') => `berth://session/${sessionId}/${what}`;

const TEMPLATES = [
  { uriTemplate: 'berth://session/{session}/record', name: 'run record of a session', mimeType: 'application/json', description: 'Every run of the session as its exported record' },
  {
    uriTemplate: 'berth://session/{session}/workspace',
    name: 'workspace tree of a session',
    mimeType: 'text/plain',
    description: "The session's workspace as it is now: one line per entry (directories end in /, files show their size), read by a recorded list_files call",
  },
];

/**
 * The session as MCP resources. `berth://session/{id}/record` is every run (call) of the session
 * as `berth export` writes it, read from the store alone. `berth://session/{id}/workspace` is the
 * workspace tree now: reading it is a `list_files` call of the session (recursive, replay `safe`),
 * because only a call may use the session's sandbox (leased, verified after a restart, restored
 * from its snapshot); so the read shows in the record like any call, and like a call it gets
 * `notifications/progress` every `progressMs` when its request asks for them (it may wait behind
 * the session's running call, or list a large tree). Both are listed for the session this server
 * works in; any session of the store can be read by its URI (the templates).
 */
export function addRecordResources(server: Server, berth: Berth, sessions: McpSessions, toMcpError: (err: unknown) => McpError, progressMs: number): void {
  setCheckedHandler(server, 'resources/list', ListResourcesRequestSchema, async () => {
    const id = sessions.sessionId;
    if (!id) return { resources: [] };
    return {
      resources: [
        { uri: uri(id, 'record'), name: `session ${id}: run record`, mimeType: 'application/json', description: 'Every call of the session as its exported run record (berth export)' },
        { uri: uri(id, 'workspace'), name: `session ${id}: workspace tree`, mimeType: 'text/plain', description: 'The workspace as it is now (a recorded list_files call)' },
      ],
    };
  });
  setCheckedHandler(server, 'resources/templates/list', ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));
  setCheckedHandler(server, 'resources/read', ReadResourceRequestSchema, async (req, extra) => {
    const m = RESOURCE_URI.exec(req.params.uri);
    if (!m) throw new WireError(ErrorCode.InvalidParams, `no resource ${shown(req.params.uri)}; resources are berth://session/{session}/record and /workspace`, { code: 'resource_unknown' });
    try {
      const sessionId = m[1]!;
      await sessions.requireSession(sessionId);
      if (m[2] === 'workspace') {
        const stopProgress = reportProgress(extra, 'list_files', progressMs);
        const listed = await sessions.call('list_files', { path: '.', recursive: true }, { sessionId, signal: extra.signal }).finally(stopProgress);
        if (listed.isError) throw new WireError(ErrorCode.InternalError, `workspace of session ${sessionId}: ${listed.content}`, { code: 'workspace_unreadable', ids: { sessionId, runId: listed.runId } });
        return { contents: [{ uri: req.params.uri, mimeType: 'text/plain', text: listed.content }] };
      }
      await sessions.ended(sessionId);
      const runs = await berth.list({ sessionId });
      const records = [];
      for (const r of runs) records.push(JSON.parse((await berth.export(r.id)).text) as unknown);
      return { contents: [{ uri: req.params.uri, mimeType: 'application/json', text: JSON.stringify({ session: sessionId, runs: records }) }] };
    } catch (err) {
      throw toMcpError(err);
    }
  });
}
