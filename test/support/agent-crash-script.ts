import type { ScriptedTurn } from './model-server';

const ADD_BUGGY = 'echo $(($1 - $2))\n';
const TEST = 'r=$(sh add.sh 2 3)\nif [ "$r" = 5 ]; then echo "ok: 2+3=$r"; else echo "FAIL: expected 5, got $r"; exit 1; fi\n';

/**
 * The crash test's model: 15 tool calls over 5 turns (write files; run the test in the sandbox
 * while reading and searching; fix it with an edit, plus a malformed and an unknown call; re-run;
 * run it once more). Each non-safe exec appends its name to /tmp/exec-log (outside the
 * workspace), so the test can count real executions. Calls of one turn touch different files and
 * no exec writes the workspace, so their order within a turn does not change any result.
 */
export const crashScript: ScriptedTurn[] = [
  {
    content: 'I will write the script and its test.',
    toolCalls: [
      { name: 'write_file', arguments: { path: 'add.sh', content: ADD_BUGGY } },
      { name: 'write_file', arguments: { path: 'test.sh', content: TEST } },
      { name: 'write_file', arguments: { path: 'README.md', content: '# add\n\nAdds two numbers.\n' } },
    ],
  },
  {
    content: 'Running the test and looking around.',
    toolCalls: [
      { name: 'exec', arguments: { command: 'echo t1 >> /tmp/exec-log; sh test.sh' } },
      { name: 'read_file', arguments: { path: 'add.sh' } },
      { name: 'search', arguments: { pattern: '$1 - $2', fixed: true } },
      { name: 'list_files', arguments: { recursive: true } },
    ],
  },
  {
    content: 'The sign is wrong; fixing it.',
    toolCalls: [
      { name: 'edit', arguments: { path: 'add.sh', old_string: '$1 - $2', new_string: '$1 + $2' } },
      { name: 'write_file', arguments: { path: 'notes.txt', content: 'fixed the sign in add.sh\n' } },
      { name: 'exec', arguments: '{"command": "sh test.sh' },
      { name: 'deploy', arguments: { target: 'prod' } },
    ],
  },
  {
    toolCalls: [
      { name: 'exec', arguments: { command: 'echo t3 >> /tmp/exec-log; sh test.sh' } },
      { name: 'read_file', arguments: { path: 'notes.txt' } },
    ],
  },
  {
    toolCalls: [
      { name: 'exec', arguments: { command: 'echo t4 >> /tmp/exec-log; sh test.sh && echo all good' } },
      { name: 'exec', arguments: { command: 'cat README.md', safe: true } },
    ],
  },
  { content: 'add.sh is fixed and the test passes.' },
];
