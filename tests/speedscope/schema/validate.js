// SPDX-License-Identifier: MIT
// Validates speedscope files against speedscope's own JSON schema (the npm package's
// dist/release/file-format-schema.json) with ajv: node validate.js FILE...; exit 0 when all are
// valid, else 1 with ajv's errors on stderr. NODE_PATH or the working directory must hold the
// packages of package-lock.json.
"use strict";
const fs = require("fs");
const Ajv = require("ajv");
const schema = require("speedscope/dist/release/file-format-schema.json");

const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
let bad = 0;
for (const file of process.argv.slice(2)) {
  const doc = JSON.parse(fs.readFileSync(file, "utf8"));
  if (validate(doc)) {
    console.log(`valid ${file}`);
  } else {
    bad++;
    console.error(`invalid ${file}: ${JSON.stringify(validate.errors.slice(0, 5))}`);
  }
}
process.exit(bad === 0 ? 0 : 1);
