// The personalization benchmark (issue 6): simulated users with hidden preferences teach the agent
// through `serve`; Binary RL, OPD and Combined for three seeds each on the cached sim base model;
// the table (JSON, markdown) and the plot go to bench/results/.
//
//   npm run bench:personalize
//   npm run bench:personalize -- --seeds 1 --methods combine --steps 8
//
// Any `openclaw-rl sim bench` option can follow the `--`.

import { runSim } from '../src/cli/sim.js';

process.exitCode = await runSim(['bench', '--out', 'bench/results', ...process.argv.slice(2)]);
