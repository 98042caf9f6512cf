// The input campaign's long-lived child: imports the built CLI once and calls its main(argv, io)
// for each input the parent sends (IPC), with stdout and stderr captured in memory, so that
// thousands of inputs do not each pay for a Node start. The parent kills it on a hang. Anything
// that escapes main (a throw, an unhandled rejection, an uncaught exception) is reported with
// the input it happened during: the real binary would have printed a stack trace for it.
import { createRequire } from "node:module";
import { Writable } from "node:stream";

// process.argv[2]: bin/load-cli.cjs, which loads the CLI as bin/termorch.js does.
const { main } = createRequire(import.meta.url)(process.argv[2]).loadCli();

let current = null;
const escaped = (kind) => (error) => {
  const text = `${kind}: ${error?.stack ?? String(error)}`;
  if (current) current.escapes.push(text);
  else process.send?.({ type: "stray", text });
};
process.on("uncaughtException", escaped("uncaughtException"));
process.on("unhandledRejection", escaped("unhandledRejection"));

function sink() {
  const chunks = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  stream.text = () => Buffer.concat(chunks).toString("utf8");
  return stream;
}

process.on("message", async (msg) => {
  if (msg.type !== "call") return;
  const stdout = sink();
  const stderr = sink();
  current = { escapes: [] };
  const started = Date.now();
  let code;
  try {
    code = await main(["node", "termorch", ...msg.argv], {
      stdout,
      stderr,
      env: { ...process.env, ...msg.env },
      cwd: msg.cwd,
    });
  } catch (error) {
    current.escapes.push(`main threw: ${error?.stack ?? String(error)}`);
    code = null;
  }
  // A rejection that escaped is reported on the next turns of the event loop.
  await new Promise((r) => setImmediate(r));
  const reply = {
    type: "done",
    id: msg.id,
    code,
    stdout: stdout.text(),
    stderr: stderr.text(),
    ms: Date.now() - started,
    escapes: current.escapes,
  };
  current = null;
  process.send(reply);
});
// The campaign went away (killed): nothing is left to answer.
process.on("disconnect", () => process.exit(0));
process.send({ type: "ready" });
