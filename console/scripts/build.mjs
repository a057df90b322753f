// Builds the console into dist/ (committed: the gateway compiles it into
// the binary, so building checkfu needs no JavaScript toolchain).
// `--check` builds into a temporary directory and fails when the result
// differs from dist/ (CI runs it).
import { build } from "esbuild";
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const check = process.argv.includes("--check");
const out = check ? await mkdtemp(join(tmpdir(), "checkfu-console-")) : join(root, "dist");
await mkdir(out, { recursive: true });

const common = { bundle: true, minify: true, legalComments: "none", logLevel: "warning", charset: "utf8" };
await build({
  ...common,
  entryPoints: [join(root, "src/main.tsx")],
  outfile: join(out, "app.js"),
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
});
await build({ ...common, entryPoints: [join(root, "src/styles.css")], outfile: join(out, "app.css") });
for (const f of ["index.html", "icon.svg"]) await copyFile(join(root, "static", f), join(out, f));

if (check) {
  const committed = join(root, "dist");
  const names = (await readdir(out)).sort();
  const differ = [];
  for (const n of names) {
    const [a, b] = await Promise.all([readFile(join(out, n)), readFile(join(committed, n)).catch(() => Buffer.alloc(0))]);
    if (!a.equals(b)) differ.push(n);
  }
  const extra = (await readdir(committed)).filter((n) => !names.includes(n));
  await rm(out, { recursive: true, force: true });
  if (differ.length || extra.length) {
    console.error(`console/dist is not what src/ builds: ${[...differ, ...extra].join(", ")} differ; run npm run build and commit dist/`);
    process.exit(1);
  }
  console.log("console/dist matches its sources");
}
