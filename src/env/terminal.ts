// The terminal environment: a shell task (src/env/terminal-tasks.ts) in a sandboxed shell
// (src/env/shell.ts). Outcome: the task's checker script, run in the same sandbox after the
// episode from a read-only /check folder the agent never saw: +1 solved, -1 not.

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EnvironmentKind, Outcome } from './environment.js';
import type { Sandbox, SandboxLimits, SandboxSetup } from './sandbox.js';
import { exitStatus, ShellEnvironment } from './shell.js';
import { terminalTasks, type TerminalTask } from './terminal-tasks.js';

export class TerminalEnvironment extends ShellEnvironment<TerminalTask> {
  protected async verdict(sandbox: Sandbox, task: TerminalTask): Promise<Outcome> {
    // Written only now, outside the agent's folders, and bound read-only.
    const check = join(sandbox.root, 'check');
    await mkdir(check, { recursive: true, mode: 0o755 });
    for (const [name, text] of Object.entries(task.expected)) await writeFile(join(check, name), text, { mode: 0o644 });
    await writeFile(join(check, 'check.sh'), `${task.checker}\n`, { mode: 0o644 });
    const r = await sandbox.run('bash /check/check.sh', { [check]: '/check' });
    const success = r.exitCode === 0;
    return { reward: success ? 1 : -1, success, detail: `checker: ${exitStatus(r)}` };
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
