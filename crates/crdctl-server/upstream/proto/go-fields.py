#!/usr/bin/env python3
"""Lists protobuf fields by what their Go field is, for the protobuf transcoder:

- `zero`: the fields whose zero value Go writes to JSON, so the decoder keeps a zero it reads
  there: pointer fields (`*int32`, `*bool`, `*string`) and fields without `omitempty`. Every
  other scalar field is a Go value field left out of JSON when zero.
- `inline`: the embedded structs whose fields JSON holds in the parent (`json:",inline"`,
  such as `SecretKeySelector`'s `LocalObjectReference`), which the message holds in a field
  of their own.
- `renamed`: the fields whose JSON name is not their protobuf name (`webhooks` is
  `Webhooks`, `uid` is `uID`), each followed by its JSON name.

Reads the Go types of kubernetes/api and kubernetes/apimachinery at a release tag from local
clones; prints one `<message>.<field number>` per line.

    go-fields.py zero API_CLONE APIMACHINERY_CLONE kubernetes-1.33.9 > zero-fields.txt
    go-fields.py inline API_CLONE APIMACHINERY_CLONE kubernetes-1.33.9 > inline-fields.txt
    go-fields.py renamed API_CLONE APIMACHINERY_CLONE kubernetes-1.33.9 > renamed-fields.txt
"""
import re
import subprocess
import sys

listing, api, apimachinery, tag = sys.argv[1:5]
PACKAGES = [(api, d, "k8s.io.api." + d.replace("/", ".")) for d in (
    "core/v1 admissionregistration/v1 apps/v1 authentication/v1 authorization/v1 autoscaling/v1 "
    "autoscaling/v2 batch/v1 certificates/v1 coordination/v1 discovery/v1 events/v1 flowcontrol/v1 "
    "networking/v1 node/v1 policy/v1 rbac/v1 scheduling/v1 storage/v1 storagemigration/v1alpha1").split()]
PACKAGES += [(apimachinery, "pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1")]

FIELD = re.compile(r'^\s+\w+\s+(\*?)[\w.\[\]*]+\s+`json:"([^"]*)".*protobuf:"[^,]+,(\d+),')
INLINE = re.compile(r'^\s+[\w.]+\s+`json:",inline".*protobuf:"[^,]+,(\d+),')
RENAMED = re.compile(r'^\s+\w+\s+[\w.\[\]*]+\s+`json:"([^",]+)[^"]*".*protobuf:"[^,]+,(\d+),[^"]*name=(\w+)')
STRUCT = re.compile(r"^type (\w+) struct \{")


def listed(line):
    """Whether a field line belongs to the listing, and its protobuf field number."""
    if listing == "inline":
        m = INLINE.match(line)
        return m.group(1) if m else None
    if listing == "renamed":
        m = RENAMED.match(line)
        return f"{m.group(2)} {m.group(1)}" if m and m.group(1) not in (m.group(3), "-") else None
    m = FIELD.match(line)
    if not m:
        return None
    pointer, json_tag, number = m.groups()
    return number if pointer or "omitempty" not in json_tag.split(",")[1:] else None


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
            elif struct and (number := listed(line)):
                print(f"{package}.{struct}.{number}")
