// Imported first by the CLI's main, before any schema is made (zod decides at construction).
// zod compiles a fast parser for each object schema at its first parse: a gain for a process
// that parses a schema thousands of times, a cost for a command that parses each a few times
// and exits (a 2-task run: 20 ms of CPU less without them; BENCHMARKS.md has the figure).
import { z } from "zod";

z.config({ jitless: true });
