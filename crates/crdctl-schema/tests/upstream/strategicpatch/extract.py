#!/usr/bin/env python3
"""Writes upstream's strategic merge patch test tables as data files.

Reads kubernetes/apimachinery's pkg/util/strategicpatch/patch_test.go (path as the first
argument) and writes one YAML file per table, each case under its upstream description, with
the fields upstream's tests apply: original + twoWay -> twoWayResult (or modified), and
current + threeWay -> result. Usage: extract.py patch_test.go
"""
import re
import sys

import yaml


def go_block(source, name):
    """The text of `var <name> = ...` up to the next top-level declaration."""
    start = source.index(f"var {name} = ")
    end = re.compile(r"^(var|func|type) ", re.M).search(source, start + 1).start()
    return source[start:end]


def yaml_table(source, name):
    text = go_block(source, name)
    body = text[text.index("`") + 1 : text.rindex("`")]
    return yaml.safe_load(body)["testCases"]


RAW_FIELD = re.compile(r"(\w+):\s*\[\]byte\(`(.*?)`\)", re.S)


def raw_table(source, name):
    text = go_block(source, name)
    cases = []
    for chunk in re.split(r"\n\t\{\n(?:\t\t//[^\n]*\n)*\t\tDescription:", text)[1:]:
        description = re.match(r'\s*"((?:[^"\\]|\\.)*)"', chunk).group(1)
        case = {"description": description}
        for field, value in RAW_FIELD.findall(chunk):
            case[field[0].lower() + field[1:]] = yaml.safe_load(value)
        error = re.search(r'ExpectedError:\s*"((?:[^"\\]|\\.)*)"', chunk)
        if error:
            case["expectedError"] = error.group(1)
        cases.append(case)
    return cases


UNKNOWN_CASE = re.compile(r'\n\t\t"([^"]+)": \{(.*?)\n\t\t\},', re.S)
UNKNOWN_FIELD = re.compile(r"(\w+):\s*`([^`]*)`")


def unknown_field_table(source):
    start = source.index("func TestUnknownField(")
    text = source[start : source.index("mergeItemOpenapiSchema", start)]
    cases = []
    for description, body in UNKNOWN_CASE.findall(text):
        fields = dict(UNKNOWN_FIELD.findall(body))
        if "ExpectedTwoWayErr" in fields or "ExpectedThreeWayErr" in fields:
            continue  # errors in making a patch, which the server does not do
        cases.append({
            "description": description,
            "original": yaml.safe_load(fields["Original"]),
            "twoWay": yaml.safe_load(fields["ExpectedTwoWay"]),
            "twoWayResult": yaml.safe_load(fields["ExpectedTwoWayResult"]),
            "current": yaml.safe_load(fields["Current"]),
            "threeWay": yaml.safe_load(fields["ExpectedThreeWay"]),
            "result": yaml.safe_load(fields["ExpectedThreeWayResult"]),
        })
    return cases


def write(path, header, cases):
    with open(path, "w") as out:
        out.write(f"# {header}\n# Extracted by extract.py from upstream's patch_test.go; see README.md.\n")
        yaml.safe_dump(cases, out, sort_keys=False, allow_unicode=True, width=100)


def main():
    source = open(sys.argv[1]).read()
    write("custom.yaml", "customStrategicMergePatchTestCaseData (TestCustomStrategicMergePatch)",
          yaml_table(source, "customStrategicMergePatchTestCaseData"))
    write("custom-raw.yaml", "customStrategicMergePatchRawTestCases (TestCustomStrategicMergePatch)",
          raw_table(source, "customStrategicMergePatchRawTestCases"))
    write("create.yaml", "createStrategicMergePatchTestCaseData (TestStrategicMergePatch)",
          yaml_table(source, "createStrategicMergePatchTestCaseData"))
    write("raw.yaml", "strategicMergePatchRawTestCases (TestStrategicMergePatch)",
          raw_table(source, "strategicMergePatchRawTestCases"))
    write("raw-extension.yaml", "replaceRawExtensionPatchTestCases (TestReplaceWithRawExtension)",
          raw_table(source, "replaceRawExtensionPatchTestCases"))
    write("unknown-field.yaml", "TestUnknownField", unknown_field_table(source))


main()
