// Validates the API documents with real parsers:
//   docs/asyncapi.yaml  @asyncapi/parser (AsyncAPI schema + its Spectral rules),
//                       and every message example against its payload schema (ajv)
//   docs/openapi.yaml   @apidevtools/swagger-parser (OpenAPI 3.0 schema + $refs)
// Usage: node check-docs.mjs [REPO_ROOT]. Exit 1 with the parsers' diagnostics
// on any error; warnings are printed and do not fail.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import { Parser, fromFile, DiagnosticSeverity } from '@asyncapi/parser';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(process.argv[2] ?? path.join(here, '..', '..'));

const severityName = { 0: 'error', 1: 'warning', 2: 'info', 3: 'hint' };

function where(d) {
  const at = d.path && d.path.length ? d.path.join('.') : '(document)';
  const line = d.range ? `:${d.range.start.line + 1}` : '';
  return `${line} ${at}`;
}

async function checkAsyncApi(file) {
  const { document, diagnostics } = await fromFile(new Parser(), file).parse();
  const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
  for (const d of diagnostics) {
    if (d.severity > DiagnosticSeverity.Warning) continue;
    console.log(`${path.relative(root, file)}${where(d)}: ${severityName[d.severity]}: ` +
                `${d.message} [${d.code}]`);
  }
  if (!document || errors.length > 0) {
    console.log(`${path.relative(root, file)}: INVALID (${errors.length} error(s))`);
    return false;
  }
  const examples = checkExamples(document, file);
  if (examples < 0) {
    console.log(`${path.relative(root, file)}: INVALID (an example does not match its schema)`);
    return false;
  }
  const channels = document.channels().length;
  const operations = document.operations().length;
  const messages = document.components().messages().length;
  console.log(`${path.relative(root, file)}: valid AsyncAPI ${document.version()} ` +
              `(${channels} channels, ${operations} operations, ${messages} messages, ` +
              `${examples} examples checked)`);
  return true;
}

// The parser does not check AsyncAPI 3 examples against their payload
// schemas; ajv does (the parser's own x-parser-* keywords are ignored).
// Returns how many examples were checked, -1 when one does not match.
function checkExamples(document, file) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  let ok = true;
  let checked = 0;
  for (const message of document.components().messages()) {
    const schema = message.payload()?.json();
    if (!schema) continue;
    const validate = ajv.compile(schema);
    for (const example of message.examples()) {
      if (!example.hasPayload()) continue;
      ++checked;
      if (validate(example.payload())) continue;
      ok = false;
      for (const e of validate.errors) {
        console.log(`${path.relative(root, file)}: error: example '${example.name()}' of message ` +
                    `'${message.id()}': ${e.instancePath || '(payload)'} ${e.message}`);
      }
    }
  }
  if (checked === 0) {
    console.log(`${path.relative(root, file)}: error: no message example found to check`);
    return -1;
  }
  return ok ? checked : -1;
}

async function checkOpenApi(file) {
  try {
    const api = await SwaggerParser.validate(file);
    console.log(`${path.relative(root, file)}: valid OpenAPI ${api.openapi} ` +
                `(${Object.keys(api.paths).length} paths)`);
    return true;
  } catch (e) {
    console.log(`${path.relative(root, file)}: INVALID\n${e.message}`);
    if (Array.isArray(e.details)) console.log(JSON.stringify(e.details, null, 2));
    return false;
  }
}

const results = [
  await checkAsyncApi(path.join(root, 'docs', 'asyncapi.yaml')),
  await checkOpenApi(path.join(root, 'docs', 'openapi.yaml')),
];
process.exit(results.every(Boolean) ? 0 : 1);
