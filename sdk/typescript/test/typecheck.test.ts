// §19.2 acceptance 2: a body missing a required field does not compile.
// The compiler runs on typecheck/*.ts with the package's own strict
// settings; the right version of the same calls proves the failure is the
// missing field and nothing else.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import ts from "typescript";
import { PACKAGE_ROOT } from "./harness.js";

function diagnostics(file: string): ts.Diagnostic[] {
  const config = ts.readConfigFile(path.join(PACKAGE_ROOT, "tsconfig.json"), ts.sys.readFile.bind(ts.sys));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, PACKAGE_ROOT);
  assert.equal(parsed.options.strict, true, "the package compiles under --strict");
  const program = ts.createProgram([path.join(PACKAGE_ROOT, "typecheck", file)], { ...parsed.options, rootDir: PACKAGE_ROOT, noEmit: true });
  return [...ts.getPreEmitDiagnostics(program)];
}

test("a body missing a required field fails to compile, naming the field", () => {
  const file = path.join(PACKAGE_ROOT, "typecheck/wrong-body.ts");
  const lines = readFileSync(file, "utf8").split("\n");
  const expected = new Map<number, string>();
  lines.forEach((line, i) => {
    const m = /expect-error: (\w+)/.exec(line);
    if (m?.[1]) expected.set(i, m[1]);
  });
  assert.equal(expected.size, 3);
  const found = diagnostics("wrong-body.ts");
  for (const d of found) {
    assert.ok(d.file && d.start !== undefined, ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    const field = expected.get(line);
    const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    assert.ok(field, `an unexpected error on line ${line + 1}: ${text}`);
    assert.match(text, new RegExp(`'${field}'`), `line ${line + 1} names ${field}: ${text}`);
    expected.delete(line);
  }
  assert.deepEqual([...expected.entries()], [], "every marked line fails to compile");
});

test("the same calls with every required field compile", () => {
  const found = diagnostics("right-body.ts").map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  assert.deepEqual(found, []);
});
