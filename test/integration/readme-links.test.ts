import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./harness.js";

/**
 * The documents whose links are checked: the README, every page under docs/ (the guides the README
 * sends a new user to, the contract, the architecture, the research notes), and the other pages at
 * the root that cite the guides.
 */
function documents(): string[] {
  const under = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? under(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : [],
    );
  return ["README.md", "RELIABILITY.md", "BENCHMARKS.md", "docker/README.md", ...under("docs")];
}

/**
 * A Markdown text with its fenced code blocks and inline code spans blanked out: a `](x)` or a
 * `# comment` there is code, not a link or a heading. Line breaks are kept, so that line numbers
 * stay true.
 */
function prose(text: string): string {
  const lines = text.split("\n");
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*(`{3,}|~{3,})/.exec(lines[i]!);
    if (fence === null) {
      if (open) {
        fence = open[1]!;
        lines[i] = "";
      }
    } else {
      // A fence closes on a line of the same character, at least as long, and nothing else.
      if (
        open &&
        open[1]![0] === fence[0] &&
        open[1]!.length >= fence.length &&
        /^\s*[`~]+\s*$/.test(lines[i]!)
      )
        fence = null;
      lines[i] = "";
    }
  }
  // A code span opens and closes with runs of the same number of backticks (```` ```json ```` included).
  return lines.join("\n").replace(/(?<!`)(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)/g, (m) => m.replace(/[^\n]/g, " "));
}

/**
 * GitHub's anchor for a heading (github-slugger, on the heading's text as rendered): links and
 * emphasis reduced to their text, lowercased, every character but letters, digits, `_`, `-` and
 * spaces dropped, each space a `-`.
 */
function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a Markdown file's headings; a repeated one is numbered `-1`, `-2`…, as on GitHub. */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of prose(readFileSync(file, "utf8")).matchAll(/^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every link of a Markdown file that stays in the repository: a relative path, an `#anchor`, or both. */
function linksOf(file: string): string[] {
  return [...prose(readFileSync(file, "utf8")).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l));
}

/** Where a link of `doc` leads: the file (the document itself for a bare `#anchor`) and the anchor. */
function target(doc: string, link: string): { file: string; anchor: string | null } {
  const hash = link.indexOf("#");
  const path = hash < 0 ? link : link.slice(0, hash);
  return {
    file: path === "" ? join(ROOT, doc) : resolve(dirname(join(ROOT, doc)), decodeURI(path)),
    anchor: hash < 0 ? null : decodeURIComponent(link.slice(hash + 1)),
  };
}

// The install from a packed tarball, the README's other promise, is `npm run test:install`'s
// (test/install/install.test.ts).
describe("the README's promises to a new user", () => {
  it("links only to files inside the repository, and to headings that exist", () => {
    const broken: string[] = [];
    for (const doc of documents()) {
      for (const link of linksOf(join(ROOT, doc))) {
        const { file, anchor } = target(doc, link);
        if (relative(ROOT, file).startsWith(".."))
          broken.push(`${doc} links outside the repository: ${link}`);
        else if (!existsSync(file)) broken.push(`${doc} links to a file that does not exist: ${link}`);
        else if (anchor !== null && file.endsWith(".md") && !anchorsOf(file).has(anchor))
          broken.push(`${doc} links to a heading that does not exist: ${link}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("links to every guide under docs/guides/", () => {
    const linked = new Set(linksOf(join(ROOT, "README.md")).map((l) => target("README.md", l).file));
    const guides = readdirSync(join(ROOT, "docs", "guides")).filter((f) => f.endsWith(".md"));
    expect(guides.length).toBeGreaterThan(0);
    for (const guide of guides)
      expect(linked.has(join(ROOT, "docs", "guides", guide)), `README.md links to docs/guides/${guide}`).toBe(
        true,
      );
  });

  it("reads anchors as GitHub makes them", () => {
    // Headings of these documents, as GitHub renders their anchors; and an underscore, which it keeps.
    expect(slug("Operators' views: watch, report.html, serve")).toBe(
      "operators-views-watch-reporthtml-serve",
    );
    expect(slug("A red integration: halt, bisect, or bisect and fix")).toBe(
      "a-red-integration-halt-bisect-or-bisect-and-fix",
    );
    expect(slug("The private folder `<run-dir>/.termorch/<run>/`")).toBe(
      "the-private-folder-run-dirtermorchrun",
    );
    expect(slug("0. Before any scale: a race lost tasks (fixed)")).toBe(
      "0-before-any-scale-a-race-lost-tasks-fixed",
    );
    expect(slug("`max_parallel` per agent")).toBe("max_parallel-per-agent");
  });
});
