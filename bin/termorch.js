#!/usr/bin/env node
import { main } from "../dist/cli/bundle.js";

process.exitCode = await main(process.argv);
