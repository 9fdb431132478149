#!/usr/bin/env node
// Loads TensorFlow.js models from their files and predicts, for pytest-dlconform's
// export.tfjs.roundtrip claim. Pure JavaScript (@tensorflow/tfjs, CPU backend): tfjs-node
// downloads a native binary at install time, which this project's machines cannot fetch,
// so the files are read with fs and handed to tfjs through tf.io.fromMemory.
//
// Usage: node run.js JOB.json RESULT.json
// JOB: {"models": [{"id", "dir", "format": "layers-model"|"graph-model",
//                   "inputs": [{"name", "shape": [..], "data": base64 float32 LE}]}]}
// RESULT: {"tfjs": version, "backend", "models": [{"id", "outputs": [[{name, shape, dtype, data}]],
//          "weights": [{name, shape, dtype, data}], "load_ms", "predict_ms"}]}
// Any failure exits non-zero with the error on stderr: the Python side reports it as a
// harness error with that text.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

function decode(entry) {
  const buf = Buffer.from(entry.data, 'base64');
  const copy = new Uint8Array(buf.length);
  copy.set(buf);
  return tf.tensor(new Float32Array(copy.buffer), entry.shape, 'float32');
}

function encode(name, t) {
  const values = t.dataSync();
  const typed = values instanceof Float32Array ? values : Float32Array.from(values);
  return {
    name, shape: t.shape, dtype: t.dtype,
    data: Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength).toString('base64'),
  };
}

// The weight files of every group, in manifest order: what tf.io.fromMemory expects.
function readArtifacts(dir) {
  const modelJson = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
  const weightSpecs = [];
  const buffers = [];
  for (const group of modelJson.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
  }
  const all = Buffer.concat(buffers);
  const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  return {
    modelTopology: modelJson.modelTopology,
    format: modelJson.format,
    generatedBy: modelJson.generatedBy,
    convertedBy: modelJson.convertedBy,
    signature: modelJson.signature,
    userDefinedMetadata: modelJson.userDefinedMetadata,
    modelInitializer: modelJson.modelInitializer,
    weightSpecs,
    weightData,
  };
}

async function runLayers(artifacts, job) {
  const model = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
  const t1 = Date.now();
  const outputs = job.inputs.map((inp) => {
    const y = model.predict(decode(inp));
    const ys = Array.isArray(y) ? y : [y];
    return ys.map((t, i) => encode(model.outputNames[i], t));
  });
  const weights = model.weights.map((w) => encode(w.originalName || w.name, w.read()));
  return { outputs, weights, predict_ms: Date.now() - t1 };
}

async function runGraph(artifacts, job) {
  const model = await tf.loadGraphModel(tf.io.fromMemory(artifacts));
  const sig = artifacts.signature || {};
  const outs = Object.entries(sig.outputs || {}).map(([key, v]) => [key, v.name.replace(/:0$/, '')]);
  const t1 = Date.now();
  const outputs = job.inputs.map((inp) => {
    const ys = model.execute({ [inp.name]: decode(inp) }, outs.map((o) => o[1]));
    const list = Array.isArray(ys) ? ys : [ys];
    return list.map((t, i) => encode(outs[i][0], t));
  });
  const weights = Object.entries(model.weights).map(([name, ts]) => encode(name, ts[0]));
  return { outputs, weights, predict_ms: Date.now() - t1 };
}

async function main() {
  const [jobPath, resultPath] = process.argv.slice(2);
  if (!jobPath || !resultPath) throw new Error('usage: node run.js JOB.json RESULT.json');
  await tf.setBackend('cpu');
  await tf.ready();
  const job = JSON.parse(fs.readFileSync(jobPath, 'utf8'));
  const models = [];
  for (const m of job.models) {
    const t0 = Date.now();
    // Unreadable files are the harness's problem (thrown); what tfjs itself refuses while
    // loading or predicting is the claim's result, reported per model with tfjs's words.
    const artifacts = readArtifacts(m.dir);
    const run = m.format === 'graph-model' ? runGraph : runLayers;
    try {
      const r = await run(artifacts, m);
      models.push({ id: m.id, load_ms: Date.now() - t0 - r.predict_ms, ...r });
    } catch (err) {
      models.push({ id: m.id, error: String(err && err.message ? err.message : err) });
    }
  }
  fs.writeFileSync(resultPath, JSON.stringify({ tfjs: tf.version.tfjs, backend: tf.getBackend(), models }));
}

main().catch((err) => {
  process.stderr.write(`tfjs runner: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
