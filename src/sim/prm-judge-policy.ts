// The agents benchmark's simulated process judge (PRM): it reads the real judge prompt of one
// tool-call step (the word problem, the assistant's calculator call, and the calculator's output,
// the next state) and votes as a judge model that works the problem out itself would:
//   +1  the step made progress: one well-formed calculator call whose numbers all come from the
//       problem or from the solution's earlier steps, and whose result is one the solution reaches
//       (an intermediate value of the solution, or the answer), taken while the solution still
//       needs calls (fewer earlier steps than it has operations)
//   -1  anything else: a calculator error, a number from nowhere, a wrong operation, or a call
//       after as many steps as the solution has operations: a loop or a wasted step, as the
//       reference's PRM rubric says. The prompt states how many steps came before, not which, so
//       a late call that corrects an earlier wrong one counts as wasted too.
// With probability errorRate a vote is flipped. A step without a tool call has no next state (it
// is the episode's last, closed by the outcome), so the judge never sees one. Hint prompts get
// "nothing to learn" (the benchmark runs with --opd-weight 0, which sends none).

import { numbersIn, solveArithmetic } from '../env/arithmetic-tasks.js';
import { evaluate } from '../env/calculator.js';
import { sameNumber } from '../env/tool-call.js';
import { readPrompt, type JudgePolicy } from './judge-policy.js';

/** The faultless vote on a step: +1 or -1, from the prompt's sections alone. */
export function prmTruth(request: string, reply: string, nextState: string): 1 | -1 {
  const earlier = /\n\[The assistant already took (\d+) steps?[^\]]*\]$/.exec(request);
  const question = (earlier ? request.slice(0, earlier.index) : request).trim();
  const solution = solveArithmetic(question);
  const calls = [...reply.matchAll(/^\[calls tool calculator\] (.*)$/gm)];
  if (solution === null || calls.length !== 1) return -1;
  if (Number(earlier?.[1] ?? 0) >= solution.values.length) return -1;
  let expression: unknown;
  try {
    expression = (JSON.parse(calls[0]![1]!) as { expression?: unknown }).expression;
  } catch {
    return -1;
  }
  // The prompt heads each tool output with its tool's name ("[TOOL calculator]").
  const output = nextState.replace(/^\[TOOL[^\]\n]*\]\n/gm, '').trim();
  if (typeof expression !== 'string' || !/^-?\d+(\.\d+)?$/.test(output)) return -1;
  const given = new Set([...numbersIn(question), ...solution.values.slice(0, -1)]);
  if (!numbersIn(expression).every((n) => given.has(n))) return -1;
  try {
    const value = evaluate(expression);
    return solution.values.some((v) => sameNumber(value, v)) ? 1 : -1;
  } catch {
    return -1;
  }
}

export const prmPolicy: JudgePolicy = (messages, errorRate, r) => {
  const prompt = readPrompt(messages);
  if (prompt === null) return null;
  if (prompt.kind === 'hint') return { kind: 'hint', content: 'Nothing to learn here.\n\\boxed{-1}', wrong: false };
  const truth = prmTruth(prompt.request, prompt.reply, prompt.nextState);
  const wrong = r.next() < errorRate;
  const score = wrong ? -truth : truth;
  const why = score === 1 ? 'the calculator call solves the problem' : 'the calculator call does not solve it';
  return { kind: 'eval', content: `The next state shows ${why}.\n\\boxed{${score}}`, wrong };
};
