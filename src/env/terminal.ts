// The terminal environment: a shell task in a fresh bubblewrap sandbox per episode (src/env/sandbox.ts)
// and one `bash` tool. Each command runs in its own sandboxed process tree over the episode's home
// folder, so files persist between commands and nothing else does (no background processes, no
// shell variables, cd lasts one command). The next state is the command's exit status and output.
// Outcome: the task's checker script, run in the same sandbox after the episode: +1 solved, -1 not.

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { toolMessage, type Environment, type EnvironmentKind, type Outcome } from './environment.js';
import { describeResult, Sandbox, type SandboxLimits, type SandboxSetup } from './sandbox.js';
import { terminalTasks, type TerminalTask } from './terminal-tasks.js';

export const BASH_TOOL: ToolSpec = {
  type: 'function',
  function: {
    name: 'bash',
    description:
      'Runs a bash command in your home folder and returns its exit code and output. Files persist between ' +
      'commands; each command starts a new shell. No network.',
    parameters: {
      type: 'object',
      properties: { command: { type: 'string', description: 'for example: ls -la' } },
      required: ['command'],
    },
  },
};

const SYSTEM_PROMPT =
  'You work in a Linux shell through the bash tool, in your home folder /home/agent. ' +
  'Do the task with commands, check the result, then reply without a tool call to finish.';

export class TerminalEnvironment implements Environment<TerminalTask> {
  readonly tools = [BASH_TOOL];
  private sandbox: Sandbox | null = null;
  private task: TerminalTask | null = null;
  private overLimit: string | null = null;

  constructor(
    private readonly setup: SandboxSetup,
    private readonly limits: SandboxLimits,
    private readonly base?: string,
  ) {}

  async reset(task: TerminalTask): Promise<ChatMessage[]> {
    await this.close();
    this.task = task;
    this.overLimit = null;
    this.sandbox = await Sandbox.create(this.setup, this.limits, this.base);
    await this.sandbox.writeFiles(task.files);
    return [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: task.instruction },
    ];
  }

  async step(assistant: ChatMessage) {
    const sandbox = this.sandbox;
    if (sandbox === null) throw new Error('step() before reset()');
    const calls = assistant.tool_calls ?? [];
    if (calls.length === 0) return { observations: [], done: true };
    const observations: ChatMessage[] = [];
    for (const call of calls) {
      const command = call.function.name === 'bash' ? commandOf(call.function.arguments) : null;
      let text: string;
      if (call.function.name !== 'bash')
        text = `error: there is no tool "${call.function.name}"; the only tool is bash`;
      else if (command === null) text = 'error: send {"command": "..."} with the command as a string';
      else text = describeResult(await sandbox.run(command), this.limits);
      observations.push(toolMessage(call.id, call.function.name, text));
    }
    const usage = await sandbox.usage();
    if (usage.over) {
      this.overLimit = `the episode's folder went over ${this.limits.directoryMb} MB`;
      return { observations, done: true };
    }
    return { observations, done: false };
  }

  async outcome(): Promise<Outcome> {
    const sandbox = this.sandbox;
    const task = this.task;
    if (sandbox === null || task === null) throw new Error('outcome() before reset()');
    if (this.overLimit !== null) return { reward: -1, success: false, detail: this.overLimit };
    // Written only now, outside the agent's folders, and bound read-only.
    const check = join(sandbox.root, 'check');
    await mkdir(check, { recursive: true, mode: 0o755 });
    for (const [name, text] of Object.entries(task.expected)) await writeFile(join(check, name), text, { mode: 0o644 });
    await writeFile(join(check, 'check.sh'), `${task.checker}\n`, { mode: 0o644 });
    const r = await sandbox.run('bash /check/check.sh', { [check]: '/check' });
    const success = r.exitCode === 0;
    const status = r.exitCode === null ? (r.timedOut ? 'timed out' : 'killed') : `exit ${r.exitCode}`;
    return { reward: success ? 1 : -1, success, detail: `checker: ${status}` };
  }

  async close(): Promise<void> {
    const sandbox = this.sandbox;
    this.sandbox = null;
    if (sandbox !== null) await sandbox.destroy();
  }
}

function commandOf(argumentsJson: string): string | null {
  try {
    const command = (JSON.parse(argumentsJson) as { command?: unknown } | null)?.command;
    return typeof command === 'string' ? command : null;
  } catch {
    return null;
  }
}

/** The terminal kind; `setup` comes from probeSandbox (the runner refuses to start without it). */
export function terminalKind(setup: SandboxSetup, limits: SandboxLimits, base?: string): EnvironmentKind<TerminalTask> {
  return {
    name: 'terminal',
    tasks: terminalTasks,
    create: () => new TerminalEnvironment(setup, limits, base),
  };
}
