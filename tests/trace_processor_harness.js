// Runs Perfetto's trace processor (the WebAssembly build inside the Perfetto
// UI's engine_bundle.js) under Node.js and speaks its RPC protocol over
// stdin/stdout: stdin carries serialized TraceProcessorRpcStream bytes (any
// chunking), stdout carries the replies exactly as the engine posts them
// (each TraceProcessorRpc framed as field 1 of TraceProcessorRpcStream).
// Log lines of the engine go to stderr.
//
// usage: node trace_processor_harness.js DIR   (DIR holds engine_bundle.js and trace_processor.wasm)
//
// The bundle is built for web workers only: it aborts when it sees Node's
// `process`, and loads the wasm with a synchronous XMLHttpRequest. So it runs
// inside a function whose parameters shadow `process` and provide the worker
// globals it uses: self (with onmessage), WorkerGlobalScope, location, a
// file-backed XMLHttpRequest and fetch that serve only files from DIR.
"use strict";

const fs = require("fs");
const path = require("path");

const dir = path.resolve(process.argv[2] || ".");
const log = (...parts) => process.stderr.write(parts.map(String).join(" ") + "\n");

function bundleFile(url) {
  // Only plain file names inside DIR are served.
  const name = path.basename(new URL(url, "http://engine.invalid/").pathname);
  return path.join(dir, name);
}

class FileXMLHttpRequest {
  open(method, url) { this.url = url; }
  send() {
    const bytes = fs.readFileSync(bundleFile(this.url));
    this.status = 200;
    this.response = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  }
}

async function fileFetch(url) {
  const bytes = fs.readFileSync(bundleFile(String(url)));
  return { ok: true, status: 200, url: String(url), arrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) };
}

function WorkerGlobalScope() {}

const workerSelf = {
  location: { href: "http://engine.invalid/engine_bundle.js" },
  onmessage: null,
  postMessage: () => {},
};

const source = fs.readFileSync(path.join(dir, "engine_bundle.js"), "utf8");
const console_ = { log, warn: log, error: log, info: log, debug: () => {} };
const run = new Function("process", "self", "WorkerGlobalScope", "XMLHttpRequest", "fetch", "location", "console", "window", "document",
  source + "\n;return typeof engine === 'undefined' ? undefined : engine;");
run(undefined, workerSelf, WorkerGlobalScope, FileXMLHttpRequest, fileFetch, workerSelf.location, console_, undefined, undefined);

if (typeof workerSelf.onmessage !== "function") {
  log("trace_processor_harness: engine_bundle.js did not install self.onmessage");
  process.exit(3);
}

// The engine talks through a MessagePort-like object: it sets port.onmessage
// and calls port.postMessage(Uint8Array) for every reply.
const port = {
  onmessage: null,
  postMessage: (data) => { process.stdout.write(Buffer.from(data.buffer, data.byteOffset, data.byteLength)); },
};
workerSelf.onmessage({ data: port });

// The engine finishes its set-up in a promise callback; wait for it before
// forwarding requests.
const pending = [];
let ready = false;
function deliver(chunk) {
  try {
    port.onmessage({ data: new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) });
  } catch (err) {
    log("trace_processor_harness: engine error:", err && err.stack ? err.stack : err);
    process.exit(4);
  }
}
setTimeout(() => {
  ready = true;
  for (const chunk of pending.splice(0)) deliver(chunk);
}, 0);
process.stdin.on("data", (chunk) => (ready ? deliver(chunk) : pending.push(chunk)));
process.stdin.on("end", () => process.exit(0));
