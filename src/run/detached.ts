/** Thrown through a task's execution when the run detaches (daemon shutdown): its agent keeps running. */
export class Detached extends Error {
  constructor() {
    super("detached: the agent keeps running in tmux and is re-adopted on resume");
  }
}
