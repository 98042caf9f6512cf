import { InvalidArgumentError } from "commander";

/** Commander's parser of a flag that takes a positive integer. */
export const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive integer");
  return n;
};
