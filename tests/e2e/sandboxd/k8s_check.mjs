// deploy/k8s's manifests, offline: each document parses as YAML (js-yaml), is a
// Kubernetes object (apiVersion, kind, metadata.name) of a kind agent-sandbox defines, and
// validates (ajv) against that kind's openAPIV3Schema in the CRD vendored unchanged in
// third_party/agent-sandbox/crds; the pod spec's containers are checked for what
// docs/fleet.md promises. Prints one JSON report line.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";
import Ajv from "ajv";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const crdDir = path.join(root, "third_party/agent-sandbox/crds");
const schemas = {};
for (const f of fs.readdirSync(crdDir)) {
  const crd = yaml.load(fs.readFileSync(path.join(crdDir, f), "utf8"));
  for (const v of crd.spec.versions)
    schemas[`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`] = v.schema.openAPIV3Schema;
}
// Kubernetes' structural-schema extensions are not JSON Schema keywords
const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
ajv.addKeyword("x-kubernetes-int-or-string");
for (const k of ["x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
                 "x-kubernetes-map-type", "x-kubernetes-embedded-resource", "x-kubernetes-validations"])
  ajv.addKeyword(k);

const report = { documents: [] };
const dir = process.argv[2] || path.join(root, "deploy/k8s");
for (const f of fs.readdirSync(dir).filter((x) => x.endsWith(".yaml")).sort()) {
  for (const doc of yaml.loadAll(fs.readFileSync(path.join(dir, f), "utf8"))) {
    if (!doc) continue;
    const key = `${doc.apiVersion}/${doc.kind}`;
    const errors = [];
    if (!doc.apiVersion || !doc.kind || !doc.metadata || !doc.metadata.name) errors.push("not a Kubernetes object");
    const schema = schemas[key];
    if (!schema) errors.push(`no CRD schema for ${key}`);
    else if (!ajv.validate(schema, doc)) errors.push(...ajv.errors.map((e) => `${e.instancePath} ${e.message}`));
    const entry = { file: f, kind: doc.kind, name: doc.metadata && doc.metadata.name, errors };
    const pod = doc.spec && doc.spec.podTemplate && doc.spec.podTemplate.spec;
    if (pod) {
      const c = pod.containers.find((x) => x.name === "abx");
      entry.runAsNonRoot = !!(pod.securityContext && pod.securityContext.runAsNonRoot);
      entry.readiness = c && c.readinessProbe && c.readinessProbe.httpGet;
      entry.ports = c ? c.ports.map((p) => p.containerPort) : [];
      entry.capsDropped = pod.containers.every((x) => x.securityContext && x.securityContext.capabilities &&
        (x.securityContext.capabilities.drop || []).includes("ALL"));
      entry.readOnlyRoot = pod.containers.every((x) => x.securityContext && x.securityContext.readOnlyRootFilesystem);
      entry.workspaceEmptyDir = (pod.volumes || []).some((v) => v.name === "workspace" && v.emptyDir);
    }
    report.documents.push(entry);
  }
}
console.log(JSON.stringify(report));
