// What the terminal and SWE environments share: an episode in a fresh bubblewrap sandbox
// (src/env/sandbox.ts) with one `bash` tool. Each command runs in its own sandboxed process tree
// over the episode's home folder, so files persist between commands and nothing else does (no
// background processes, no shell variables, cd lasts one command). The next state is the command's
// exit status and output. Each environment decides the outcome its own way, after the episode.

import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { toolMessage, type Environment, type EnvTask, type Outcome } from './environment.js';
import { describeResult, Sandbox, type SandboxLimits, type SandboxSetup } from './sandbox.js';

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

export const SHELL_SYSTEM_PROMPT =
  'You work in a Linux shell through the bash tool, in your home folder /home/agent. ' +
  'Do the task with commands, check the result, then reply without a tool call to finish.';

/** A task played in a shell: the user's message and the files the home folder starts with. */
export interface ShellTask extends EnvTask {
  instruction: string;
  /** Files in the agent's home folder at the start (relative paths). */
  files: Record<string, string>;
}

export abstract class ShellEnvironment<T extends ShellTask> implements Environment<T> {
  readonly tools = [BASH_TOOL];
  private sandbox: Sandbox | null = null;
  private task: T | null = null;
  private overLimit: string | null = null;

  constructor(
    private readonly setup: SandboxSetup,
    protected readonly limits: SandboxLimits,
    private readonly base?: string,
  ) {}

  /** The outcome of a finished episode whose folder stayed within its limit. */
  protected abstract verdict(sandbox: Sandbox, task: T): Promise<Outcome>;

  async reset(task: T): Promise<ChatMessage[]> {
    await this.close();
    this.task = task;
    this.overLimit = null;
    this.sandbox = await Sandbox.create(this.setup, this.limits, this.base);
    await this.sandbox.writeFiles(task.files);
    return [
      { role: 'system', content: SHELL_SYSTEM_PROMPT },
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
    return this.verdict(sandbox, task);
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

/** How a command ended, in a verdict's words. */
export function exitStatus(r: { exitCode: number | null; timedOut: boolean }): string {
  return r.exitCode === null ? (r.timedOut ? 'timed out' : 'killed') : `exit ${r.exitCode}`;
}
