//! The `None` strategy: only `apiVersion` changes. Field differences between versions are not
//! reconciled; pruning against the target schema happens elsewhere.

use serde_json::Value;

/// Sets every object's `apiVersion` to `desired_api_version`.
pub fn convert(objects: Vec<Value>, desired_api_version: &str) -> Vec<Value> {
    objects
        .into_iter()
        .map(|mut object| {
            if let Some(map) = object.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(desired_api_version.into()));
            }
            object
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn only_the_api_version_changes() {
        let objects = vec![json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "hostPort": "a:1"})];
        assert_eq!(
            super::convert(objects, "example.com/v1"),
            [json!({"apiVersion": "example.com/v1", "kind": "CronTab", "hostPort": "a:1"})]
        );
    }
}
