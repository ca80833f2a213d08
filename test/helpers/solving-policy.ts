// A scripted policy (TEST DOUBLE of the model) that solves the tool-call, terminal and swe
// environments: a calculator call computing the answer, then "Answer: <the tool's result>"; or the
// family's shell solution (a terminal task's, or an swe task's fix), then "Done.".  `wrongAnswerAt` names a math task (by index) whose answer it gets wrong by 1.

import type { SweTask } from '../../src/env/swe-tasks.js';
import type { TerminalTask } from '../../src/env/terminal-tasks.js';
import type { MathTask } from '../../src/env/tool-call.js';
import { scriptedBackend } from './gateway.js';
import { replyIds } from './scripted-sampler.js';
import { sweFix } from './swe-solutions.js';
import { terminalSolution } from './terminal-solutions.js';

export async function solvingBackend(
  mathTasks: readonly MathTask[],
  shellTasks: readonly (TerminalTask | SweTask)[],
  opts: { wrongAnswerAt?: number } = {},
) {
  const scripted = await scriptedBackend(undefined, {
    fallback: (promptIds) => {
      const tokenizer = scripted.backend.tokenizer;
      const prompt = tokenizer.decode(promptIds);
      const math = mathTasks.findIndex((t) => prompt.includes(t.question));
      const result = [...prompt.matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].pop()?.[1];
      if (result !== undefined) {
        const answer = math === opts.wrongAnswerAt ? Number(result) + 1 : result;
        return { ids: replyIds(tokenizer, { content: math >= 0 ? `Answer: ${answer}` : 'Done.' }) };
      }
      const command = () => {
        const task = shellTasks.find((t) => prompt.includes(t.instruction))!;
        return 'hidden' in task ? sweFix(task) : terminalSolution(task);
      };
      const call =
        math >= 0
          ? {
              name: 'calculator',
              arguments: JSON.stringify({ expression: `${mathTasks[math]!.answer.replace(/,/g, '')} * 1` }),
            }
          : { name: 'bash', arguments: JSON.stringify({ command: command() }) };
      return { ids: replyIds(tokenizer, { toolCalls: [{ function: call }] }) };
    },
  });
  return scripted;
}
