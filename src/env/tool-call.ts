// The tool-call environment: a GSM8K math word problem and a `calculator` tool. Each call's
// result (or its error) is the next state; the episode ends when the model answers without a
// tool call. Outcome: +1 when the answer's number equals GSM8K's, else -1 (a missing answer is
// wrong), so outcome rewards are symmetric around 0 like the judge's votes.

import { contentToText, type ChatMessage, type ToolSpec } from '../chat/messages.js';
import { createRng } from '../engine/local/sampling/random.js';
import { loadProblems, type Problem } from '../sim/problems.js';
import { arithmeticProblems, type ArithmeticSplit } from './arithmetic-tasks.js';
import { CalculatorError, evaluate, formatNumber } from './calculator.js';
import { toolMessage, type EnvTask, type Environment, type EnvironmentKind, type Outcome } from './environment.js';

export interface MathTask extends EnvTask {
  question: string;
  /** GSM8K's answer as written there (e.g. "1,200" or "36"). */
  answer: string;
}

export const CALCULATOR_TOOL: ToolSpec = {
  type: 'function',
  function: {
    name: 'calculator',
    description: 'Evaluates an arithmetic expression: numbers, + - * / ^ and parentheses. Returns the number.',
    parameters: {
      type: 'object',
      properties: { expression: { type: 'string', description: 'for example (12 + 30) * 4 / 3' } },
      required: ['expression'],
    },
  },
};

export const TOOL_CALL_SYSTEM_PROMPT =
  'Solve the math word problem. Use the calculator tool for every arithmetic step. ' +
  'When you know the result, reply without a tool call and end with "Answer: <number>".';

/** The number an answer text gives: after "Answer:", in \boxed{} or after "####", else its last number. */
export function extractAnswer(text: string): number | null {
  const marked = /(?:answer\s*(?:is|:)|\\boxed\{|####)\s*\$?\s*(-?[\d,]*\.?\d+)/gi;
  const found = [...text.matchAll(marked)].pop()?.[1] ?? [...text.matchAll(/-?\d[\d,]*\.?\d*/g)].pop()?.[0];
  if (found === undefined) return null;
  const value = Number(found.replace(/,/g, '').replace(/\.$/, ''));
  return Number.isFinite(value) ? value : null;
}

export function sameNumber(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
}

/** The result of one calculator call, as the tool message's text. */
export function calculatorResult(argumentsJson: string): string {
  let args: unknown;
  try {
    args = JSON.parse(argumentsJson);
  } catch {
    return 'error: the arguments are not JSON; send {"expression": "..."}';
  }
  const expression = (args as { expression?: unknown } | null)?.expression;
  if (typeof expression !== 'string') return 'error: send {"expression": "..."} with the expression as a string';
  try {
    return formatNumber(evaluate(expression));
  } catch (e) {
    if (e instanceof CalculatorError) return `error: ${e.message}`;
    throw e;
  }
}

export class ToolCallEnvironment implements Environment<MathTask> {
  readonly tools = [CALCULATOR_TOOL];
  private task: MathTask | null = null;
  private finalText: string | null = null;

  async reset(task: MathTask): Promise<ChatMessage[]> {
    this.task = task;
    this.finalText = null;
    return [
      { role: 'system', content: TOOL_CALL_SYSTEM_PROMPT },
      { role: 'user', content: task.question },
    ];
  }

  async step(assistant: ChatMessage) {
    if (this.task === null) throw new Error('step() before reset()');
    const calls = assistant.tool_calls ?? [];
    if (calls.length === 0) {
      this.finalText = contentToText(assistant.content);
      return { observations: [], done: true };
    }
    const observations = calls.map((call) =>
      toolMessage(
        call.id,
        call.function.name,
        call.function.name === 'calculator'
          ? calculatorResult(call.function.arguments)
          : `error: there is no tool "${call.function.name}"; the only tool is calculator`,
      ),
    );
    return { observations, done: false };
  }

  async outcome(): Promise<Outcome> {
    if (this.task === null) throw new Error('outcome() before reset()');
    const expected = Number(this.task.answer.replace(/,/g, ''));
    if (this.finalText === null) return { reward: -1, success: false, detail: 'no final answer (step limit)' };
    const given = extractAnswer(this.finalText);
    if (given === null) return { reward: -1, success: false, detail: `no number in the answer, expected ${expected}` };
    const success = sameNumber(given, expected);
    return { reward: success ? 1 : -1, success, detail: `answer ${given}, expected ${expected}` };
  }

  async close(): Promise<void> {
    this.task = null;
  }
}

/** GSM8K's problems in a seeded order; ids are the problem's position in the file (`gsm8k-17`). */
export function toolCallKind(problems: () => Problem[] = allProblems): EnvironmentKind<MathTask> {
  return {
    name: 'tool-call',
    tasks(count, seed) {
      const all = problems();
      if (count > all.length) throw new Error(`--tasks ${count}: the tool-call environment has ${all.length} problems`);
      return shuffled(all, seed)
        .slice(0, count)
        .map((p) => ({ id: `gsm8k-${p.index}`, family: 'gsm8k', question: p.question, answer: p.answer }));
    },
    create: () => new ToolCallEnvironment(),
  };
}

/** Where the tool-call environment's tasks come from (`env run --tasks-from`). */
export type ToolCallSource = 'gsm8k' | 'arithmetic';

export const TOOL_CALL_SOURCES: readonly ToolCallSource[] = ['gsm8k', 'arithmetic'];

/**
 * Generated arithmetic word problems (arithmetic-tasks.ts) of one split: `tasks(count, seed)` takes
 * positions seed * 10000 onwards, so each seed has its own tasks and a seed gives the same ones again.
 */
export function arithmeticKind(split: ArithmeticSplit = 'train', minOperations = 1): EnvironmentKind<MathTask> {
  return {
    name: 'tool-call',
    taskSource: minOperations > 1 ? `arithmetic-${split}-${minOperations}op` : `arithmetic-${split}`,
    tasks(count, seed) {
      if (count > 10_000) throw new Error(`--tasks ${count}: at most 10000 arithmetic tasks per seed`);
      return arithmeticProblems(split, count, seed * 10_000, minOperations).map((p) => ({
        id: p.id,
        family: p.template,
        question: p.question,
        answer: p.answer,
      }));
    },
    create: () => new ToolCallEnvironment(),
  };
}

function allProblems(): Problem[] {
  const split = loadProblems();
  return [...split.train, ...split.eval];
}

/** Fisher-Yates with the project's seeded generator. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  const rng = createRng(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
