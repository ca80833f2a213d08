// One episode of a shell environment (terminal, swe) played with given bash commands: reset, one
// step with every command as a tool call, a final answer, the outcome.

import assert from 'node:assert/strict';
import type { ChatMessage } from '../../src/chat/messages.js';
import type { EnvironmentKind } from '../../src/env/environment.js';
import type { ShellTask } from '../../src/env/shell.js';

/** An assistant message calling the bash tool once per command. */
export const bashCalls = (...commands: string[]): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: commands.map((command, i) => ({
    id: `call_${i}`,
    type: 'function',
    function: { name: 'bash', arguments: JSON.stringify({ command }) },
  })),
});

export async function playShell<T extends ShellTask>(kind: EnvironmentKind<T>, task: T, commands: string[]) {
  const env = kind.create();
  try {
    const first = await env.reset(task);
    assert.equal(first[1]!.content, task.instruction);
    const observations: ChatMessage[] = [];
    if (commands.length > 0) {
      const r = await env.step(bashCalls(...commands));
      assert.equal(r.done, false);
      observations.push(...r.observations);
    }
    assert.deepEqual(await env.step({ role: 'assistant', content: 'Done.' }), { observations: [], done: true });
    return { outcome: await env.outcome(), observations, outputs: observations.map((m) => String(m.content)) };
  } finally {
    await env.close();
  }
}
