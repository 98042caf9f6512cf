#!/usr/bin/env node
import { createRequire } from "node:module";

const { main } = createRequire(import.meta.url)("./load-cli.cjs").loadCli();
process.exitCode = await main(process.argv);
