#!/usr/bin/env node
// openclaw-rl command line. Each command lives in its own file and only wires things together.
//
//   openclaw-rl model init --family qwen3 --preset tiny --out models/tiny
//   openclaw-rl generate --model models/tiny --prompt "Hello" --max-tokens 32
//   openclaw-rl generate --model models/tiny --prompt "Hello" --json
//   openclaw-rl train --model models/tiny --samples samples.jsonl --out adapters/a1 --steps 10
//   openclaw-rl serve --model models/tiny --data data
//   openclaw-rl export --data data --out turns.jsonl
//   openclaw-rl data export --session ID --data data --out session.json
//   openclaw-rl env run --env tool-call --url http://127.0.0.1:30000/v1
//   openclaw-rl versions list --data data

import { runData } from './data.js';
import { runEnv } from './env.js';
import { runExport } from './export.js';
import { runMergeExport } from './export-merged.js';
import { runGenerate } from './generate.js';
import { runModelInit } from './model-init.js';
import { runServe } from './serve.js';
import { runSim } from './sim.js';
import { runTrain } from './train.js';
import { runVersions } from './versions.js';
import { CliError } from './args.js';

const USAGE = `usage: openclaw-rl <command> [options]

commands:
  model init   write a random-initialised model folder (Hugging Face format)
  generate     generate a completion with the embedded engine
  train        train a LoRA adapter or all weights offline from a JSONL file of samples
  serve        run the OpenAI-compatible gateway that records every main-line turn
  export       write the recorded turns as JSONL; with --merge, fold a LoRA adapter into a model folder
  data         one session's data: delete it, or export it as JSON (data delete|export --session ID)
  env          play agent environments (tool-call, terminal) against serve, outcomes as feedback
  versions     list the published policy versions, or roll back to one (list|rollback N --data DIR)
  sim          the personalization benchmark: simulated users teach the agent (pretrain, run, bench, demo)

Run "openclaw-rl <command> --help" for the options of a command.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'model' && rest[0] === 'init') return runModelInit(rest.slice(1));
  if (command === 'generate') return runGenerate(rest);
  if (command === 'train') return runTrain(rest);
  if (command === 'serve') return runServe(rest);
  if (command === 'sim') return runSim(rest);
  if (command === 'data') return runData(rest);
  if (command === 'env') return runEnv(rest);
  if (command === 'versions') return runVersions(rest);
  if (command === 'export') return rest.includes('--merge') ? runMergeExport(rest) : runExport(rest);
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  throw new CliError(`unknown command "${argv.join(' ')}"\n\n${USAGE}`);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: Error) => {
    console.error(`openclaw-rl: ${e.message}`);
    process.exitCode = e instanceof CliError ? 2 : 1;
  },
);
