/**
 * Every `ts` example of docs/sdk-node.md type-checks against the SDK, so a renamed call or
 * option cannot outlive its documentation. Each block becomes the body of an async
 * function, with a `client` declared and the names the page imports from "watchkeeper".
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";

import ts from "typescript";

import { REPO } from "./server.js";

const SDK = join(REPO, "sdk", "node");
const PAGE = join(REPO, "docs", "sdk-node.md");

interface Block {
  line: number;
  code: string;
}

function blocks(text: string): Block[] {
  const found: Block[] = [];
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index += 1) {
    if (lines[index]?.trim() !== "```ts") {
      continue;
    }
    const start = index + 1;
    let end = start;
    while (end < lines.length && lines[end]?.trim() !== "```") {
      end += 1;
    }
    found.push({ line: start, code: lines.slice(start, end).join("\n") });
    index = end;
  }
  return found;
}

it("the examples of docs/sdk-node.md type-check against the SDK", () => {
  const examples = blocks(readFileSync(PAGE, "utf8"));
  assert.ok(examples.length >= 10, `only ${examples.length} examples found`);
  const imported = new Set(["Client"]);
  const files = new Map<string, string>();
  for (const example of examples) {
    const body: string[] = [];
    for (const line of example.code.split("\n")) {
      const names = /^import \{([^}]*)\} from "watchkeeper";$/.exec(line.trim());
      if (names) {
        names[1]?.split(",").forEach((name) => imported.add(name.trim()));
      } else {
        body.push(line);
      }
    }
    files.set(join(SDK, `docs-example-${example.line}.mts`), body.join("\n"));
  }
  const prelude = `import { ${[...imported].join(", ")} } from "watchkeeper";\ndeclare const client: Client;\n`;
  for (const [name, body] of files) {
    files.set(
      name,
      `${prelude}export async function example(): Promise<void> {\n${body}\n}\nvoid [${[...imported].join(", ")}];\n`,
    );
  }
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2022.d.ts"],
    types: ["node"],
    typeRoots: [join(SDK, "node_modules", "@types")],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    paths: { watchkeeper: [join(SDK, "src", "index.ts")] },
  };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const source = host.getSourceFile.bind(host);
  host.readFile = (file) => files.get(file) ?? read(file);
  host.fileExists = (file) => files.has(file) || exists(file);
  host.getSourceFile = (file, language, ...rest) => {
    const text = files.get(file);
    return text === undefined ? source(file, language, ...rest) : ts.createSourceFile(file, text, language);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const problems = ts.getPreEmitDiagnostics(program).map((problem) => {
    const where =
      problem.file && problem.start !== undefined
        ? problem.file.getLineAndCharacterOfPosition(problem.start)
        : undefined;
    const block = problem.file ? /docs-example-(\d+)/.exec(problem.file.fileName)?.[1] : undefined;
    // The page's line: the block's first line, plus the line in the wrapped body (after 3 of prelude).
    const line = block && where ? Number(block) + where.line - 2 : "?";
    return `docs/sdk-node.md:${line}: ${ts.flattenDiagnosticMessageText(problem.messageText, "\n")}`;
  });
  assert.deepEqual(problems, []);
});
