use crate::util::*;

#[test]
fn seed_v1beta1_crontab_converts() {
    let out = crdctl(&["convert-crd", "examples/crontab/legacy-v1beta1-crd.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    insta::assert_snapshot!(out.stdout);
    assert!(out.stderr.contains("spec.preserveUnknownFields: true is not allowed"), "{}", out.stderr);
}

#[test]
fn every_v1beta1_corpus_file_converts_to_a_valid_v1_crd() {
    let dir = tempfile::tempdir().unwrap();
    let mut converted = 0;
    for file in corpus_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        if !text.contains("apiextensions.k8s.io/v1beta1") {
            continue;
        }
        let name = short(&file);
        for format in ["yaml", "json"] {
            let out = crdctl(&["convert-crd", "-o", format, file.to_str().unwrap()]);
            assert_eq!(out.code, 0, "{name}: {out:?}");
            assert!(!out.stdout.contains("v1beta1\nkind: CustomResourceDefinition"), "{name}");
            let v1 = dir.path().join(format!("v1.{format}"));
            std::fs::write(&v1, &out.stdout).unwrap();
            let validated = crdctl(&["validate", v1.to_str().unwrap()]);
            assert_eq!(validated.code, 0, "{name} ({format}): {validated:?}");
            assert!(!validated.stderr.contains("v1beta1 is not served"), "{name}: output is still v1beta1");
            // Converting the output again changes nothing: YAML and JSON output are lossless.
            let again = crdctl(&["convert-crd", "-o", "json", v1.to_str().unwrap()]);
            let first: serde_json::Value =
                serde_json::from_str(&crdctl(&["convert-crd", "-o", "json", file.to_str().unwrap()]).stdout).unwrap();
            let second: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
            assert_eq!(first, second, "{name} ({format})");
        }
        converted += 1;
    }
    assert_eq!(converted, 8);
}

#[test]
fn v1_input_is_printed_unchanged() {
    let file = corpus().join("real/karpenter/karpenter.sh_nodepools.v0.37.7.yaml");
    let out = crdctl(&["convert-crd", "-o", "json", file.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    let printed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let original: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(printed, original);
}
