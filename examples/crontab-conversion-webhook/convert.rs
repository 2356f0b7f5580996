//! The CronTab conversion from the Kubernetes documentation: `example.com/v1beta1` keeps
//! `hostPort: "host:port"`, `example.com/v1` keeps `host` and `port`.

use serde_json::Value;

/// Converts one CronTab to `desired` (`example.com/v1` or `example.com/v1beta1`).
pub fn convert_crontab(mut object: Value, desired: &str) -> Result<Value, String> {
    let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let fields = object.as_object_mut().ok_or("object is not a JSON object")?;
    match (from.as_str(), desired) {
        (from, to) if from == to => {}
        ("example.com/v1beta1", "example.com/v1") => {
            if let Some(host_port) = fields.shift_remove("hostPort") {
                let text = host_port.as_str().unwrap_or_default();
                let parts: Vec<&str> = text.split(':').collect();
                let [host, port] = parts.as_slice() else {
                    return Err("hostPort could not be parsed into a separate host and port".into());
                };
                fields.insert("host".into(), Value::String(host.to_string()));
                fields.insert("port".into(), Value::String(port.to_string()));
            }
        }
        ("example.com/v1", "example.com/v1beta1") => {
            let host = fields.shift_remove("host");
            let port = fields.shift_remove("port");
            if host.is_some() || port.is_some() {
                let part = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
                fields.insert("hostPort".into(), Value::String(format!("{}:{}", part(host), part(port))));
            }
        }
        (_, to) if !to.starts_with("example.com/") => return Err(format!("unexpected conversion version {to:?}")),
        (from, _) => return Err(format!("unexpected conversion version {from:?}")),
    }
    Ok(object)
}
