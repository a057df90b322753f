"""Validates a custom resource (JSON) against its CRD's schema, as the API
server would: `python3 validate.py CRD.yaml RESOURCE.json`. OpenAPI's
`nullable` becomes JSON Schema's `type: [T, "null"]`. Used by
e2e/tests/chart.rs."""
import json, sys
import jsonschema


def nullable(node):
    if isinstance(node, dict):
        if node.get("nullable") and "type" in node:
            node["type"] = [node["type"], "null"]
        for v in node.values():
            nullable(v)
    elif isinstance(node, list):
        for v in node:
            nullable(v)


def main():
    with open(sys.argv[1]) as f:
        crd = json.load(f)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    nullable(schema)
    with open(sys.argv[2]) as f:
        jsonschema.validate(json.load(f), schema)
    print("ok")


if __name__ == "__main__":
    main()
