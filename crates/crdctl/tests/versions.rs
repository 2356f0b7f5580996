use crate::util::*;

#[test]
fn sort_orders_the_seed_list() {
    let out = crdctl(&[
        "versions",
        "sort",
        "foo10",
        "v11alpha2",
        "v1",
        "v3beta1",
        "v12alpha1",
        "foo1",
        "v10beta3",
        "v2",
        "v11beta2",
        "v10",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "v10\nv2\nv1\nv11beta2\nv10beta3\nv3beta1\nv12alpha1\nv11alpha2\nfoo1\nfoo10\n");
}

#[test]
fn sort_needs_versions() {
    let out = crdctl(&["versions", "sort"]);
    assert_eq!(out.code, 2, "{out:?}");
}

#[test]
fn table_marks_the_preferred_version() {
    let out = crdctl(&["versions", "examples/crontab/3-v1-storage.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    insta::assert_snapshot!(out.stdout, @r"
    crontabs.example.com (examples/crontab/3-v1-storage.yaml)
      VERSION  SERVED  STORAGE  DEPRECATED
      v1       yes     yes      no          preferred (kubectl default)
      v1beta1  yes     no       yes
    ");
}

#[test]
fn json_lists_versions_in_priority_order() {
    let corpus = corpus();
    let file = corpus.join("real/cluster-api/cluster.x-k8s.io_clusters.v1.12.4.yaml");
    let out = crdctl(&["versions", "--output", "json", file.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let crd = &report[0];
    assert_eq!(crd["name"], "clusters.cluster.x-k8s.io");
    assert_eq!(crd["storageVersion"], "v1beta2");
    // v1alpha3 and v1alpha4 are not served, so kubectl's default is the highest served one.
    assert_eq!(crd["preferredVersion"], "v1beta2");
    let names: Vec<&str> = crd["versions"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["v1beta2", "v1beta1", "v1alpha4", "v1alpha3"]);
    assert_eq!(crd["versions"][2]["served"], false);
}

#[test]
fn versions_reads_standard_input() {
    let yaml = std::fs::read(repo_root().join("examples/crontab/2-v1-added.yaml")).unwrap();
    let out = crdctl_in(&repo_root(), &["versions", "-o", "json", "-"], Some(&yaml));
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report[0]["file"], "<stdin>");
    assert_eq!(report[0]["preferredVersion"], "v1");
    assert_eq!(report[0]["storageVersion"], "v1beta1");
}

#[test]
fn a_directory_is_read_recursively() {
    let out = crdctl(&["versions", "-o", "json", "examples/crontab"]);
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let files: Vec<&str> = report.as_array().unwrap().iter().map(|c| c["file"].as_str().unwrap()).collect();
    assert_eq!(files.len(), 5, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with("examples/crontab/")), "{files:?}");
}
