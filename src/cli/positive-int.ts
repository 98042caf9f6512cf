import { InvalidArgumentError } from "commander";

/** Commander's parser of a flag that takes a positive integer. */
export const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive integer");
  return n;
};

/** Commander's parser of a flag that takes a positive number (an amount of USD). */
export const positiveNumber = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a positive number");
  return n;
};
