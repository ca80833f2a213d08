// The SWE environment: a generated Python repository with one bug and an issue that reports it
// (src/env/swe-tasks.ts), fixed through the sandboxed shell (src/env/shell.ts). Outcome, after the
// episode: a probe runs the hidden calls against the repository in the same sandbox and prints
// each result as JSON; the expected results stay outside and are compared here. So code under test
// cannot read the answers or fake a passing test run: it can only return the right values.
//   +1  every hidden call returns its expected value (the fix works on other arguments than the
//       issue's, and the module's other functions still do)
//   -1  anything else: a wrong value, an exception, an import error, no readable probe output

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EnvironmentKind, Outcome } from './environment.js';
import type { Sandbox, SandboxLimits, SandboxSetup } from './sandbox.js';
import { exitStatus, ShellEnvironment } from './shell.js';
import { sweTasks, type CallValue, type SweTask } from './swe-tasks.js';

// Isolated mode (-I: no current folder, user site or PYTHON* variables) with the repository
// appended to the path, so nothing in it can stand in for a standard module. One line of JSON,
// marked, so that whatever the code under test prints is not taken for the results.
const PROBE = `import importlib, json, sys
sys.path.append('/home/agent')
calls = json.load(open('/probe/calls.json'))
results = []
for c in calls:
    try:
        value = getattr(importlib.import_module(c['module']), c['function'])(*c['args'])
        json.dumps(value)
        results.append({'value': value})
    except BaseException as e:
        results.append({'error': type(e).__name__})
print('\\n' + PROBE_MARK + json.dumps(results), flush=True)
`;
const PROBE_MARK = 'openclaw-rl-probe:';

export class SweEnvironment extends ShellEnvironment<SweTask> {
  protected async verdict(sandbox: Sandbox, task: SweTask): Promise<Outcome> {
    const probe = join(sandbox.root, 'probe');
    await mkdir(probe, { recursive: true, mode: 0o755 });
    const calls = task.hidden.map(({ module, function: fn, args }) => ({ module, function: fn, args }));
    await writeFile(join(probe, 'calls.json'), JSON.stringify(calls), { mode: 0o644 });
    await writeFile(join(probe, 'probe.py'), `PROBE_MARK = ${JSON.stringify(PROBE_MARK)}\n${PROBE}`, { mode: 0o644 });
    const r = await sandbox.run('python3 -I -B /probe/probe.py', { [probe]: '/probe' });
    const results = probeResults(r.output, calls.length);
    if (results === null) return { reward: -1, success: false, detail: `probe: ${exitStatus(r)}, no results` };
    const passed = task.hidden.filter((c, i) => {
      const got = results[i]!;
      return 'value' in got && sameValue(got.value, c.expected);
    }).length;
    const success = passed === task.hidden.length;
    return { reward: success ? 1 : -1, success, detail: `hidden calls: ${passed}/${task.hidden.length} right` };
  }
}

type ProbeResult = { value: CallValue } | { error: string };

/** The probe's marked line, if it has one result per call. */
export function probeResults(output: string, calls: number): ProbeResult[] | null {
  const line = output
    .split('\n')
    .reverse()
    .find((l) => l.startsWith(PROBE_MARK));
  if (line === undefined) return null;
  try {
    const parsed = JSON.parse(line.slice(PROBE_MARK.length)) as unknown;
    return Array.isArray(parsed) && parsed.length === calls ? (parsed as ProbeResult[]) : null;
  } catch {
    return null;
  }
}

/** Deep equality of JSON values; numbers within 1e-9 (Python's 3.0 is JSON's 3). */
export function sameValue(a: CallValue, b: CallValue): boolean {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]!));
  }
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    const keys = Object.keys(b);
    return Object.keys(a).length === keys.length && keys.every((k) => k in a && sameValue(a[k]!, b[k]!));
  }
  return a === b;
}

/** The SWE kind; `setup` comes from probeSandbox (the runner refuses to start without it). */
export function sweKind(setup: SandboxSetup, limits: SandboxLimits, base?: string): EnvironmentKind<SweTask> {
  return {
    name: 'swe',
    tasks: sweTasks,
    create: () => new SweEnvironment(setup, limits, base),
  };
}
