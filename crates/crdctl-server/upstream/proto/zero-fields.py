#!/usr/bin/env python3
"""Lists the protobuf fields whose zero value Go writes to JSON, so the protobuf decoder keeps
a zero it reads there: pointer fields (`*int32`, `*bool`, `*string`) and fields without
`omitempty`. Every other scalar field is a Go value field left out of JSON when zero.

Reads the Go types of kubernetes/api and kubernetes/apimachinery at a release tag from local
clones; prints one `<message>.<field number>` per line.

    zero-fields.py API_CLONE APIMACHINERY_CLONE kubernetes-1.33.9 > zero-fields.txt
"""
import re
import subprocess
import sys

api, apimachinery, tag = sys.argv[1:4]
PACKAGES = [(api, d, "k8s.io.api." + d.replace("/", ".")) for d in (
    "core/v1 admissionregistration/v1 apps/v1 authentication/v1 authorization/v1 autoscaling/v1 "
    "autoscaling/v2 batch/v1 certificates/v1 coordination/v1 discovery/v1 events/v1 flowcontrol/v1 "
    "networking/v1 node/v1 policy/v1 rbac/v1 scheduling/v1 storage/v1 storagemigration/v1alpha1").split()]
PACKAGES += [(apimachinery, "pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1")]

FIELD = re.compile(r'^\s+\w+\s+(\*?)[\w.\[\]*]+\s+`json:"([^"]*)".*protobuf:"[^,]+,(\d+),')
STRUCT = re.compile(r"^type (\w+) struct \{")
for repo, directory, package in PACKAGES:
    files = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", f"{tag}:{directory}"],
                           capture_output=True, text=True, check=True).stdout.split()
    for name in sorted(f for f in files if (f.startswith("types") and f.endswith(".go")) or f == "group_version.go"):
        source = subprocess.run(["git", "-C", repo, "show", f"{tag}:{directory}/{name}"],
                                capture_output=True, text=True, check=True).stdout
        struct = None
        for line in source.splitlines():
            if m := STRUCT.match(line):
                struct = m.group(1)
            elif line.startswith("}"):
                struct = None
            elif struct and (m := FIELD.match(line)):
                pointer, json_tag, number = m.groups()
                if pointer or "omitempty" not in json_tag.split(",")[1:]:
                    print(f"{package}.{struct}.{number}")
