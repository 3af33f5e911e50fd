// SPDX-License-Identifier: MIT
// Validates settings against dotmon's schema with ajv (strict: the schema itself must be clean).
// Usage: node validate.js <node_modules> <schema.json> <cases.json>
// cases.json: [{"name": "...", "settings": {...}}, ...]. Prints one JSON line per case:
// {"name": "...", "errors": [{"path": "/Metrics/Enabled", "message": "..."}, ...]}.
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, schemaPath, casesPath] = process.argv.slice(2);
const Ajv = require(path.join(modules, 'ajv'));
const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, strict: true });
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaPath, 'utf8')));
for (const c of JSON.parse(fs.readFileSync(casesPath, 'utf8'))) {
  const ok = validate(c.settings);
  const errors = ok ? [] : validate.errors.map((e) => ({
    path: e.instancePath,
    message: e.message + (e.params && e.params.additionalProperty
      ? ` (${e.params.additionalProperty})` : ''),
    keyword: e.keyword,
  }));
  process.stdout.write(JSON.stringify({ name: c.name, errors }) + '\n');
}
