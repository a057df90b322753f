"""Lints and renders the chart with default and production-like values,
and validates every manifest against the Kubernetes schemas. Prints one
line per manifest and exits non-zero on any failure. Used by the chart test
in e2e/tests/chart.rs (and runnable by hand)."""
import json, os, subprocess, sys, tempfile
import yaml
import helm_python

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

def merge(into, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v
    return into

def render(values_files):
    values = {}
    for values_file in values_files:
        with open(values_file) as f:
            merge(values, yaml.safe_load(f))
    helm_python.lint(CHART, values, strict=True)
    chart = helm_python.Chart.load(CHART)
    return chart.render(values, name="checkfu", namespace="checkfu", is_install=True)

def main():
    report = {}
    prod = os.path.join(CHART, "ci", "production-values.yaml")
    kube = os.path.join(CHART, "ci", "kubernetes-values.yaml")
    scaled = os.path.join(CHART, "ci", "autoscaling-values.yaml")
    for label, vfs in [("default", []), ("production", [prod]), ("kubernetes", [prod, kube]), ("autoscaling", [prod, scaled])]:
        files = render(vfs)
        docs = []
        for path, text in sorted(files.items()):
            for doc in yaml.safe_load_all(text):
                if doc:
                    docs.append(doc)
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, doc in enumerate(docs):
                p = os.path.join(d, f"{i:03}-{doc['kind']}-{doc['metadata']['name']}.yaml")
                with open(p, "w") as f:
                    yaml.safe_dump(doc, f)
                paths.append(p)
            r = subprocess.run(["kubernetes-validate", "--strict", "--quiet", *paths], capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout, r.stderr, file=sys.stderr)
                sys.exit(1)
        report[label] = [{"kind": doc["kind"], "name": doc["metadata"]["name"], "doc": doc} for doc in docs]
    json.dump(report, sys.stdout)

if __name__ == "__main__":
    main()
