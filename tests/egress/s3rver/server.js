// SPDX-License-Identifier: MIT
// s3rver (pinned in package-lock.json) for dotmon's egress tests, with what s3rver 3.7.1 lacks and
// the tests need:
//  - AbortMultipartUpload (DELETE /bucket/key?uploadId=) and ListMultipartUploads
//    (GET /bucket?uploads): s3rver answers both MethodNotAllowed / NotImplemented *after* its
//    SigV4 check passed, so they are served here only then (a bad signature still fails), from
//    s3rver's own store (its uploads/ folder per bucket, where parts wait until completed);
//  - fault injection for a part: POST /__fault {"part": N, "mode": "500" | "drop", "times": K}
//    makes the next K UploadPart requests for part N answer 500 InternalError (without reading
//    the body) or lose their connection.
//  - SigV4: s3rver accepts any version 4 signature unchecked, so every request that carries an
//    Authorization header is signed again here with aws4 (an independent signer, pinned too) for
//    the S3RVER/S3RVER account, and refused with 403 SignatureDoesNotMatch unless the two agree.
//    Temporary keys that the tests' STS and container endpoint hand out ("TMPKEY…") have the
//    secret "secret-of-" followed by the key id.
//  - a request log when S3RVER_REQUEST_LOG names a file: one JSON line per request (method, url,
//    the access key id of its Authorization, the headers it signed, and its SSE headers), so
//    that a test can see what a client sent and signed even where s3rver ignores it.
// Usage: node server.js DATA_DIR [CERT KEY]; prints {"port": N} once listening on 127.0.0.1.
'use strict';

const fs = require('fs');
const path = require('path');
const aws4 = require('aws4');
const S3rver = require('s3rver');
const AWSAccount = require('s3rver/lib/models/account');

const [dir, cert, key] = process.argv.slice(2);
const opts = { directory: dir, address: '127.0.0.1', port: 0, silent: true };
if (cert && key) {
  opts.cert = fs.readFileSync(cert);
  opts.key = fs.readFileSync(key);
}
const server = new S3rver(opts);
const faults = new Map(); // part number -> { mode, times }

function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function uploadsDir(bucket) {
  return server.store.getResourcePath(bucket, undefined, 'uploads');
}

async function abortUpload(ctx, bucket, uploadId) {
  const d = path.join(uploadsDir(bucket), path.basename(uploadId));
  if (!fs.existsSync(d)) {
    ctx.status = 404;
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code>' +
      '<Message>The specified upload does not exist.</Message></Error>';
    return;
  }
  fs.rmSync(d, { recursive: true, force: true });
  ctx.status = 204;
  ctx.body = null;
}

function listUploads(ctx, bucket) {
  const d = uploadsDir(bucket);
  const ids = fs.existsSync(d) ? fs.readdirSync(d) : [];
  const items = ids.map(id => {
    let k = '';
    try {
      k = fs.readFileSync(path.join(d, id, 'key'), 'utf8');
    } catch (e) {
      k = '';
    }
    const when = fs.statSync(path.join(d, id)).mtime.toISOString();
    return `<Upload><Key>${xmlEscape(k)}</Key><UploadId>${xmlEscape(id)}</UploadId>` +
      `<Initiated>${when}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`;
  });
  ctx.status = 200;
  ctx.type = 'application/xml';
  ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Bucket>${xmlEscape(bucket)}</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>` +
    `<MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${items.join('')}` +
    '</ListMultipartUploadsResult>';
}

async function readJson(req) {
  let s = '';
  for await (const chunk of req) s += chunk;
  return JSON.parse(s || '{}');
}

// The Authorization aws4 computes for this request from the headers it says it signed.
function expectedAuthorization(ctx, auth) {
  const m = /SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$/.exec(auth);
  if (!m) return null;
  const headers = {};
  for (const h of m[1].split(';')) {
    if (h !== 'host') headers[h] = ctx.get(h);
  }
  const o = { host: ctx.get('host'), method: ctx.method, path: ctx.url, headers,
    service: 's3', region: 'us-east-1' };
  const id = (/Credential=([^/]+)\//.exec(auth) || [])[1];
  const creds = id && id.startsWith('TMPKEY')
    ? { accessKeyId: id, secretAccessKey: 'secret-of-' + id }
    : { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  if (creds.accessKeyId !== 'S3RVER' && !AWSAccount.registry.has(creds.accessKeyId)) {
    // s3rver knows its one account's key only: a temporary key joins that account.
    AWSAccount.DUMMY_ACCOUNT.createKeyPair(creds.accessKeyId, creds.secretAccessKey);
  }
  aws4.sign(o, creds);
  return o.headers.Authorization;
}

// The same for a pre-signed URL (X-Amz-Signature in the query): the signature aws4 computes for
// the URL without it, at the URL's own X-Amz-Date; null when the URL has expired.
function expectedQuerySignature(ctx) {
  const u = new URL(ctx.url, 'http://x');
  const date = u.searchParams.get('X-Amz-Date') || '';
  const expires = Number(u.searchParams.get('X-Amz-Expires') || '0');
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!m) return 'bad X-Amz-Date';
  const t = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  if (Date.now() > t + expires * 1000) return null;
  const q = new URLSearchParams(u.search);
  for (const k of ['X-Amz-Signature', 'X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Date',
    'X-Amz-SignedHeaders']) {
    q.delete(k);
  }
  const qs = q.toString().replace(/\+/g, '%20');
  const o = { host: ctx.get('host'), method: ctx.method, path: u.pathname + (qs ? '?' + qs : ''),
    service: 's3', region: 'us-east-1', signQuery: true, headers: {} };
  const signer = new aws4.RequestSigner(o, { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  signer.datetime = date;
  signer.sign();
  return new URL(o.path, 'http://x').searchParams.get('X-Amz-Signature');
}

function refuse(ctx, code, message) {
  ctx.status = 403;
  ctx.type = 'application/xml';
  ctx.set('Connection', 'close');
  ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error>`;
}

const requestLog = process.env.S3RVER_REQUEST_LOG;

function logRequest(ctx, auth) {
  const cred = /Credential=([^/]+)\//.exec(auth);
  const signed = /SignedHeaders=([^,]+),/.exec(auth);
  const entry = { method: ctx.method, url: ctx.url, accessKeyId: cred ? cred[1] : null,
    signedHeaders: signed ? signed[1].split(';') : [],
    sse: ctx.get('x-amz-server-side-encryption') || null,
    kmsKeyId: ctx.get('x-amz-server-side-encryption-aws-kms-key-id') || null,
    securityToken: ctx.get('x-amz-security-token') ? true : false };
  fs.appendFileSync(requestLog, JSON.stringify(entry) + '\n');
}

server.middleware.unshift(async (ctx, next) => {
  const auth = ctx.get('authorization');
  if (requestLog && ctx.path !== '/__fault') logRequest(ctx, auth);
  if (auth) {
    const want = expectedAuthorization(ctx, auth);
    if (want !== auth) {
      process.stderr.write(`signature mismatch: ${ctx.method} ${ctx.url}\n got ${auth}\n want ${want}\n`);
      return refuse(ctx, 'SignatureDoesNotMatch', 'The request signature we calculated does ' +
        'not match the signature you provided. Check your key and signing method.');
    }
  }
  if ('X-Amz-Signature' in ctx.query) {
    const want = expectedQuerySignature(ctx);
    if (want === null) {
      return refuse(ctx, 'AccessDenied', 'Request has expired');
    }
    if (want !== ctx.query['X-Amz-Signature']) {
      process.stderr.write(`query signature mismatch: ${ctx.method} ${ctx.url}\n want ${want}\n`);
      return refuse(ctx, 'SignatureDoesNotMatch', 'The request signature we calculated does ' +
        'not match the signature you provided. Check your key and signing method.');
    }
  }
  if (ctx.method === 'POST' && ctx.path === '/__fault') {
    const f = await readJson(ctx.req);
    faults.set(Number(f.part), { mode: f.mode, times: Number(f.times) });
    ctx.status = 204;
    return;
  }
  const q = ctx.query;
  if (ctx.method === 'PUT' && q.partNumber && q.uploadId) {
    const f = faults.get(Number(q.partNumber));
    if (f && f.times > 0) {
      f.times--;
      if (f.mode === 'drop') {
        ctx.req.socket.destroy();
        ctx.respond = false;
        return;
      }
      ctx.status = 500;
      ctx.type = 'application/xml';
      ctx.set('Connection', 'close');
      ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>' +
        `<Message>injected failure of part ${q.partNumber}</Message></Error>`;
      return;
    }
  }
  try {
    await next();
  } catch (err) {
    const parts = ctx.path.split('/').filter(Boolean);
    if (err.code === 'MethodNotAllowed' && ctx.method === 'DELETE' && q.uploadId &&
        parts.length >= 2) {
      return abortUpload(ctx, decodeURIComponent(parts[0]), q.uploadId);
    }
    if (err.code === 'NotImplemented' && ctx.method === 'GET' && 'uploads' in q &&
        parts.length === 1) {
      return listUploads(ctx, decodeURIComponent(parts[0]));
    }
    throw err;
  }
});

server.run().then(addr => {
  process.stdout.write(JSON.stringify({ port: addr.port }) + '\n');
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close().then(() => process.exit(0)));
}
// A client that goes away mid-part while the upload is aborted (the tests' DELETE mid-upload)
// can leave s3rver's part writer failing on a folder just removed; a store keeps serving then, so
// the server logs the error instead of dying with it.
process.on('uncaughtException', e => process.stderr.write(`uncaught: ${(e && e.stack) || e}\n`));
process.on('unhandledRejection', e => process.stderr.write(`unhandled: ${(e && e.stack) || e}\n`));
