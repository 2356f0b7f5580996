//! The `Table` columns of the kinds whose printers compute their cells (upstream's
//! `pkg/printers/internalversion/printers.go`): what `kubectl get` shows, and with `-o wide`
//! the columns of priority 1. Kinds whose cells are plain paths are defined in the table.

use serde_json::{Value, json};

use crate::table::{Column, Source};

/// `Name`, a kind's own columns, then `Age`, as upstream's printers order them; wide columns
/// (priority 1) follow `Age`.
pub fn columns(own: Vec<Column>) -> Vec<Column> {
    columns_around_age(own, Vec::new())
}

/// [`columns`] for the printers that show some of their own after `Age` (a Node's `Version`,
/// a PriorityClass's `PreemptionPolicy`).
fn columns_around_age(before: Vec<Column>, after: Vec<Column>) -> Vec<Column> {
    let (narrow, wide): (Vec<Column>, Vec<Column>) = before.into_iter().partition(|c| c.priority == 0);
    let mut columns = vec![Column::name()];
    columns.extend(narrow);
    columns.push(Column::age());
    columns.extend(after);
    columns.extend(wide);
    columns
}

/// A count a Go printer reads from an `int32` field: 0 when missing.
pub fn count(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn or_none(text: &str) -> Value {
    json!(if text.is_empty() { "<none>" } else { text })
}

fn items<'a>(object: &'a Value, pointer: &str) -> impl Iterator<Item = &'a Value> {
    object.pointer(pointer).and_then(Value::as_array).into_iter().flatten()
}

fn string(name: &str, priority: i64, description: &str, print: fn(&Value) -> Value) -> Column {
    Column::new(name, "string", priority, description, Source::Computed(print))
}

fn integer(name: &str, description: &str, print: fn(&Value) -> Value) -> Column {
    Column::new(name, "integer", 0, description, Source::Computed(print))
}

/// How long ago a timestamp was, as `translateTimestampSince`.
fn ago(timestamp: &str) -> Option<String> {
    let then = crate::object::parse_timestamp(timestamp)?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    Some(crate::table::human_duration(now - then))
}

/// `labels.FormatLabels` of a map: `a=b,c=d` in key order, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> Value {
    let Some(labels) = labels.and_then(Value::as_object).filter(|l| !l.is_empty()) else { return json!("<none>") };
    let mut pairs: Vec<String> =
        labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
    pairs.sort();
    json!(pairs.join(","))
}

/// `metav1.FormatLabelSelector`: `app=web,tier in (a,b)`, `<none>` for an empty selector.
fn format_selector(selector: Option<&Value>) -> Value {
    let Some(selector) = selector.filter(|s| s.is_object()) else { return json!("<none>") };
    let mut parts: Vec<String> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let mut pairs: Vec<String> =
            labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
        pairs.sort();
        parts.extend(pairs);
    }
    for requirement in items(selector, "/matchExpressions") {
        let key = text(requirement, "/key");
        let values: Vec<&str> = items(requirement, "/values").filter_map(Value::as_str).collect();
        parts.push(match text(requirement, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    json!(if parts.is_empty() { "<none>".to_string() } else { parts.join(",") })
}

/// A pod template's containers' names and images, and the selector, for `-o wide`.
fn template_columns(selector: Option<fn(&Value) -> Value>) -> Vec<Column> {
    // A workload's pod spec, or a CronJob's job's.
    fn pod_spec(object: &Value) -> &Value {
        for pointer in ["/spec/template/spec", "/spec/jobTemplate/spec/template/spec"] {
            if let Some(spec) = object.pointer(pointer) {
                return spec;
            }
        }
        &Value::Null
    }
    let names =
        |o: &Value| json!(items(pod_spec(o), "/containers").map(|c| text(c, "/name")).collect::<Vec<_>>().join(","));
    let images =
        |o: &Value| json!(items(pod_spec(o), "/containers").map(|c| text(c, "/image")).collect::<Vec<_>>().join(","));
    let mut wide = vec![
        string("Containers", 1, "Names of each container in the template.", names),
        string("Images", 1, "Images referenced by each container in the template.", images),
    ];
    if let Some(selector) = selector {
        wide.push(string("Selector", 1, "The label selector.", selector));
    }
    wide
}

fn spec_selector(o: &Value) -> Value {
    format_selector(o.pointer("/spec/selector"))
}

/// A Pod's: `Ready`, `Status` and `Restarts` as upstream's `printPod` computes them; wide `IP`,
/// `Node`, `Nominated Node`, `Readiness Gates`.
pub fn pod() -> Vec<Column> {
    columns(vec![
        string("Ready", 0, "The aggregate readiness state of this pod for accepting traffic.", |p| {
            json!(format!("{}/{}", pod_state(p).ready, pod_state(p).total))
        }),
        string("Status", 0, "The aggregate status of the containers in this pod.", |p| json!(pod_state(p).reason)),
        string(
            "Restarts",
            0,
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            |p| json!(pod_state(p).restarts),
        ),
        string("IP", 1, "podIP address allocated to the pod.", |p| {
            or_none(items(p, "/status/podIPs").next().map_or("", |ip| text(ip, "/ip")))
        }),
        string("Node", 1, "NodeName indicates in which node this pod is scheduled.", |p| {
            or_none(text(p, "/spec/nodeName"))
        }),
        string(
            "Nominated Node",
            1,
            "nominatedNodeName is set only when this pod preempts other pods on the node.",
            |p| or_none(text(p, "/status/nominatedNodeName")),
        ),
        string("Readiness Gates", 1, "If specified, all readiness gates will be evaluated for pod readiness.", |p| {
            let gates: Vec<&str> = items(p, "/spec/readinessGates").map(|g| text(g, "/conditionType")).collect();
            if gates.is_empty() {
                return json!("<none>");
            }
            let conditions: Vec<&Value> = items(p, "/status/conditions").collect();
            let met = gates
                .iter()
                .filter(|gate| {
                    conditions.iter().find(|c| text(c, "/type") == **gate).is_some_and(|c| text(c, "/status") == "True")
                })
                .count();
            json!(format!("{met}/{}", gates.len()))
        }),
    ])
}

/// What `printPod` computes of a Pod's containers.
struct PodState {
    ready: usize,
    total: usize,
    reason: String,
    restarts: String,
}

fn pod_state(pod: &Value) -> PodState {
    let phase = text(pod, "/status/phase");
    let mut reason = match text(pod, "/status/reason") {
        "" => phase.to_string(),
        given => given.to_string(),
    };
    if items(pod, "/status/conditions")
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let init_containers: Vec<&Value> = items(pod, "/spec/initContainers").collect();
    let sidecar =
        |name: &str| init_containers.iter().any(|c| text(c, "/name") == name && text(c, "/restartPolicy") == "Always");
    let total = items(pod, "/spec/containers").count()
        + init_containers.iter().filter(|c| text(c, "/restartPolicy") == "Always").count();
    let (mut ready, mut restarts, mut sidecar_restarts) = (0, 0, 0);
    let mut last_restart = String::new();
    let later = |finished: &str, last: &mut String| {
        if finished > last.as_str() {
            *last = finished.to_string();
        }
    };
    let mut initializing = false;
    let init_statuses: Vec<&Value> = items(pod, "/status/initContainerStatuses").collect();
    for (index, status) in init_statuses.iter().enumerate() {
        restarts += count(status, "/restartCount");
        later(text(status, "/lastState/terminated/finishedAt"), &mut last_restart);
        let name = text(status, "/name");
        if sidecar(name) {
            sidecar_restarts += count(status, "/restartCount");
        }
        let terminated = status.pointer("/state/terminated");
        let waiting_reason = text(status, "/state/waiting/reason");
        if terminated.is_some_and(|t| count(t, "/exitCode") == 0) {
            continue;
        }
        if sidecar(name) && status.get("started") == Some(&json!(true)) {
            if status.get("ready") == Some(&json!(true)) {
                ready += 1;
            }
            continue;
        }
        reason = match terminated {
            Some(terminated) => match text(terminated, "/reason") {
                "" if count(terminated, "/signal") != 0 => format!("Init:Signal:{}", count(terminated, "/signal")),
                "" => format!("Init:ExitCode:{}", count(terminated, "/exitCode")),
                given => format!("Init:{given}"),
            },
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                format!("Init:{waiting_reason}")
            }
            None => format!("Init:{index}/{}", init_containers.len()),
        };
        initializing = true;
        break;
    }
    let initialized =
        items(pod, "/status/conditions").any(|c| text(c, "/type") == "Initialized" && text(c, "/status") == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        let mut running = false;
        for status in items(pod, "/status/containerStatuses").collect::<Vec<_>>().into_iter().rev() {
            restarts += count(status, "/restartCount");
            later(text(status, "/lastState/terminated/finishedAt"), &mut last_restart);
            let terminated = status.pointer("/state/terminated");
            if !text(status, "/state/waiting/reason").is_empty() {
                reason = text(status, "/state/waiting/reason").to_string();
            } else if let Some(terminated) = terminated {
                reason = match text(terminated, "/reason") {
                    "" if count(terminated, "/signal") != 0 => format!("Signal:{}", count(terminated, "/signal")),
                    "" => format!("ExitCode:{}", count(terminated, "/exitCode")),
                    given => given.to_string(),
                };
            } else if status.get("ready") == Some(&json!(true)) && status.pointer("/state/running").is_some() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            let ready_condition =
                items(pod, "/status/conditions").any(|c| text(c, "/type") == "Ready" && text(c, "/status") == "True");
            reason = if ready_condition { "Running" } else { "NotReady" }.into();
        }
    }
    if crate::object::meta_field(pod, "deletionTimestamp").is_some() {
        if text(pod, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(phase, "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts = match ago(&last_restart) {
        Some(since) if restarts != 0 => format!("{restarts} ({since} ago)"),
        _ => restarts.to_string(),
    };
    PodState { ready, total, reason, restarts }
}

/// A Deployment's: `Ready` (ready of desired), `Up-to-date`, `Available`; wide containers,
/// images and selector.
pub fn deployment() -> Vec<Column> {
    let mut own = vec![
        string("Ready", 0, "Number of the pod with ready state.", |d| {
            json!(format!("{}/{}", count(d, "/status/readyReplicas"), count(d, "/spec/replicas")))
        }),
        integer(
            "Up-to-date",
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            |d| json!(count(d, "/status/updatedReplicas")),
        ),
        integer(
            "Available",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            |d| json!(count(d, "/status/availableReplicas")),
        ),
    ];
    own.extend(template_columns(Some(spec_selector)));
    columns(own)
}

/// A ReplicaSet's or ReplicationController's: `Desired`, `Current`, `Ready`.
pub fn replica_set() -> Vec<Column> {
    let mut own = vec![
        integer("Desired", "Number of desired pods.", |r| json!(count(r, "/spec/replicas"))),
        integer("Current", "Number of actual replicas.", |r| json!(count(r, "/status/replicas"))),
        integer("Ready", "Number of ready replicas.", |r| json!(count(r, "/status/readyReplicas"))),
    ];
    own.extend(template_columns(Some(spec_selector)));
    columns(own)
}

/// A ReplicationController's, whose selector is a map.
pub fn replication_controller() -> Vec<Column> {
    let mut own = replica_set();
    if let Some(selector) = own.iter_mut().find(|c| c.name == "Selector") {
        *selector = string("Selector", 1, "The label selector.", |r| format_labels(r.pointer("/spec/selector")));
    }
    own
}

/// A StatefulSet's: `Ready` (ready of desired).
pub fn stateful_set() -> Vec<Column> {
    let mut own = vec![string("Ready", 0, "Number of the pod with ready state.", |s| {
        json!(format!("{}/{}", count(s, "/status/readyReplicas"), count(s, "/spec/replicas")))
    })];
    own.extend(template_columns(None));
    columns(own)
}

/// A DaemonSet's: `Desired`, `Current`, `Ready`, `Up-to-date`, `Available`, `Node Selector`.
pub fn daemon_set() -> Vec<Column> {
    let mut own = vec![
        integer("Desired", "The desired number of nodes that should be running the daemon pod.", |d| {
            json!(count(d, "/status/desiredNumberScheduled"))
        }),
        integer("Current", "The number of nodes that are running at least 1 daemon pod.", |d| {
            json!(count(d, "/status/currentNumberScheduled"))
        }),
        integer(
            "Ready",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            |d| json!(count(d, "/status/numberReady")),
        ),
        integer("Up-to-date", "The total number of nodes that are running updated daemon pod.", |d| {
            json!(count(d, "/status/updatedNumberScheduled"))
        }),
        integer(
            "Available",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            |d| json!(count(d, "/status/numberAvailable")),
        ),
        string(
            "Node Selector",
            0,
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
            |d| format_labels(d.pointer("/spec/template/spec/nodeSelector")),
        ),
    ];
    own.extend(template_columns(Some(spec_selector)));
    columns(own)
}

fn has_condition(object: &Value, kind: &str) -> bool {
    items(object, "/status/conditions").any(|c| text(c, "/type") == kind && text(c, "/status") == "True")
}

/// A Job's: `Status`, `Completions`, `Duration`.
pub fn job() -> Vec<Column> {
    let mut own = vec![
        string("Status", 0, "Status of the job.", |j| {
            let status = if has_condition(j, "Complete") {
                "Complete"
            } else if has_condition(j, "Failed") {
                "Failed"
            } else if crate::object::meta_field(j, "deletionTimestamp").is_some() {
                "Terminating"
            } else if has_condition(j, "Suspended") {
                "Suspended"
            } else if has_condition(j, "FailureTarget") {
                "FailureTarget"
            } else if has_condition(j, "SuccessCriteriaMet") {
                "SuccessCriteriaMet"
            } else {
                "Running"
            };
            json!(status)
        }),
        string("Completions", 0, "The desired number of successfully finished pods the job should be run with.", |j| {
            let succeeded = count(j, "/status/succeeded");
            let parallelism = j.pointer("/spec/parallelism").and_then(Value::as_i64);
            json!(match (j.pointer("/spec/completions").and_then(Value::as_i64), parallelism) {
                (Some(completions), _) => format!("{succeeded}/{completions}"),
                (None, Some(parallelism)) if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
                _ => format!("{succeeded}/1"),
            })
        }),
        string("Duration", 0, "Time required to complete the job.", |j| {
            let at =
                |pointer: &str| j.pointer(pointer).and_then(Value::as_str).and_then(crate::object::parse_timestamp);
            json!(match (at("/status/startTime"), at("/status/completionTime")) {
                (None, _) => String::new(),
                (Some(start), None) => {
                    crate::table::human_duration(time::OffsetDateTime::now_utc().unix_timestamp() - start)
                }
                (Some(start), Some(end)) => crate::table::human_duration(end - start),
            })
        }),
    ];
    own.extend(template_columns(Some(spec_selector)));
    columns(own)
}

/// A CronJob's: `Schedule`, `Timezone`, `Suspend`, `Active`, `Last Schedule`.
pub fn cron_job() -> Vec<Column> {
    let mut own = vec![
        string("Schedule", 0, "The schedule in Cron format.", |c| json!(text(c, "/spec/schedule"))),
        string("Timezone", 0, "The time zone name for the given schedule.", |c| or_none(text(c, "/spec/timeZone"))),
        string("Suspend", 0, "Whether subsequent executions are suspended.", |c| {
            json!(if c.pointer("/spec/suspend") == Some(&json!(true)) { "True" } else { "False" })
        }),
        integer("Active", "Active holds pointers to currently running jobs.", |c| {
            json!(items(c, "/status/active").count())
        }),
        string("Last Schedule", 0, "Information when was the last time the job was successfully scheduled.", |c| {
            json!(ago(text(c, "/status/lastScheduleTime")).unwrap_or_else(|| "<none>".into()))
        }),
    ];
    own.extend(template_columns(Some(|c| format_selector(c.pointer("/spec/jobTemplate/spec/selector")))));
    columns(own)
}

/// A Node's: `Status`, `Roles`, `Version`; wide addresses and node info.
pub fn node() -> Vec<Column> {
    fn address(node: &Value, kind: &str) -> Value {
        or_none(items(node, "/status/addresses").find(|a| text(a, "/type") == kind).map_or("", |a| text(a, "/address")))
    }
    fn info(node: &Value, field: &str) -> Value {
        match text(node, &format!("/status/nodeInfo/{field}")) {
            "" => json!("<unknown>"),
            value => json!(value),
        }
    }
    let version = string("Version", 0, "Kubelet Version reported by the node.", |n| {
        json!(text(n, "/status/nodeInfo/kubeletVersion"))
    });
    columns_around_age(
        vec![
            string("Status", 0, "The status of the node", |n| {
                let ready =
                    items(n, "/status/conditions").find(|c| text(c, "/type") == "Ready").map(|c| text(c, "/status"));
                let mut status = match ready {
                    Some("True") => "Ready".to_string(),
                    Some(_) => "NotReady".to_string(),
                    None => "Unknown".to_string(),
                };
                if n.pointer("/spec/unschedulable") == Some(&json!(true)) {
                    status.push_str(",SchedulingDisabled");
                }
                json!(status)
            }),
            string("Roles", 0, "The roles of the node", |n| {
                let labels = n.pointer("/metadata/labels").and_then(Value::as_object);
                let mut roles: Vec<String> = labels
                    .into_iter()
                    .flatten()
                    .filter_map(|(key, value)| match key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role) if !role.is_empty() => Some(role.to_string()),
                        _ if key == "kubernetes.io/role" => {
                            value.as_str().filter(|v| !v.is_empty()).map(str::to_string)
                        }
                        _ => None,
                    })
                    .collect();
                roles.sort();
                roles.dedup();
                or_none(&roles.join(","))
            }),
            string("Internal-IP", 1, "List of addresses reachable to the node.", |n| address(n, "InternalIP")),
            string("External-IP", 1, "List of addresses reachable to the node.", |n| address(n, "ExternalIP")),
            string(
                "OS-Image",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                |n| info(n, "osImage"),
            ),
            string(
                "Kernel-Version",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                |n| info(n, "kernelVersion"),
            ),
            string(
                "Container-Runtime",
                1,
                "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                |n| info(n, "containerRuntimeVersion"),
            ),
        ],
        vec![version],
    )
}

/// A Service's: `Type`, `Cluster-IP`, `External-IP`, `Port(s)` (`80/TCP`, `80:30080/TCP`);
/// wide `Selector`.
pub fn service() -> Vec<Column> {
    let external = |s: &Value| {
        let ips: Vec<&str> = items(s, "/spec/externalIPs").filter_map(Value::as_str).collect();
        let balanced: Vec<&str> = items(s, "/status/loadBalancer/ingress")
            .map(|i| if text(i, "/ip").is_empty() { text(i, "/hostname") } else { text(i, "/ip") })
            .collect();
        match text(s, "/spec/type") {
            _ if !ips.is_empty() => json!(ips.join(",")),
            "LoadBalancer" if !balanced.is_empty() => json!(balanced.join(",")),
            "LoadBalancer" => json!("<pending>"),
            "ExternalName" => json!(text(s, "/spec/externalName")),
            _ => json!("<none>"),
        }
    };
    let ports = |s: &Value| {
        let ports: Vec<String> = items(s, "/spec/ports")
            .map(|p| {
                let protocol = p["protocol"].as_str().unwrap_or("TCP");
                match p.get("nodePort") {
                    Some(node_port) => format!("{}:{node_port}/{protocol}", p["port"]),
                    None => format!("{}/{protocol}", p["port"]),
                }
            })
            .collect();
        or_none(&ports.join(","))
    };
    columns(vec![
        Column::new("Type", "string", 0, "The type of the service.", Source::Path(".spec.type".into())),
        Column::new("Cluster-IP", "string", 0, "The cluster IP.", Source::Path(".spec.clusterIP".into())),
        string("External-IP", 0, "The external IPs of the service.", external),
        string("Port(s)", 0, "The ports of the service.", ports),
        string("Selector", 1, "The label selector.", |s| format_labels(s.pointer("/spec/selector"))),
    ])
}

/// A PersistentVolume's: capacity, access modes, reclaim policy, status, claim, class.
pub fn persistent_volume() -> Vec<Column> {
    columns(vec![
        string("Capacity", 0, "The capacity of the volume.", |v| json!(text(v, "/spec/capacity/storage"))),
        string("Access Modes", 0, "The access modes.", |v| json!(access_modes(items(v, "/spec/accessModes")))),
        string("Reclaim Policy", 0, "What happens to the volume when released from its claim.", |v| {
            json!(text(v, "/spec/persistentVolumeReclaimPolicy"))
        }),
        string(
            "Status",
            0,
            "Phase indicates if a volume is available, bound to a claim, or released by a claim.",
            |v| json!(text(v, "/status/phase")),
        ),
        string("Claim", 0, "The claim bound.", |v| {
            json!(match text(v, "/spec/claimRef/name") {
                "" => String::new(),
                name => format!("{}/{name}", text(v, "/spec/claimRef/namespace")),
            })
        }),
        string("StorageClass", 0, "The storage class.", |v| json!(text(v, "/spec/storageClassName"))),
        string("VolumeAttributesClass", 0, "The volume attributes class.", |v| {
            unset(text(v, "/spec/volumeAttributesClassName"))
        }),
        string("Reason", 0, "Reason is a brief CamelCase string that describes any failure.", |v| {
            json!(text(v, "/status/reason"))
        }),
        string("VolumeMode", 1, "The volume mode.", |v| json!(text(v, "/spec/volumeMode"))),
    ])
}

/// A PersistentVolumeClaim's: status, volume, capacity, access modes, class.
pub fn persistent_volume_claim() -> Vec<Column> {
    columns(vec![
        string("Status", 0, "Phase represents the current phase of PersistentVolumeClaim.", |c| {
            json!(text(c, "/status/phase"))
        }),
        string("Volume", 0, "The binding reference to the PersistentVolume backing this claim.", |c| {
            json!(text(c, "/spec/volumeName"))
        }),
        string("Capacity", 0, "The capacity of the volume.", |c| json!(text(c, "/status/capacity/storage"))),
        string("Access Modes", 0, "The access modes.", |c| json!(access_modes(items(c, "/status/accessModes")))),
        string("StorageClass", 0, "The storage class.", |c| json!(text(c, "/spec/storageClassName"))),
        string("VolumeAttributesClass", 0, "The volume attributes class.", |c| {
            unset(text(c, "/spec/volumeAttributesClassName"))
        }),
        string("VolumeMode", 1, "The volume mode.", |c| json!(text(c, "/spec/volumeMode"))),
    ])
}

fn unset(text: &str) -> Value {
    json!(if text.is_empty() { "<unset>" } else { text })
}

/// `GetAccessModesAsString`: `RWO,ROX,RWX,RWOP` in that order.
fn access_modes<'a>(modes: impl Iterator<Item = &'a Value>) -> String {
    let modes: Vec<&str> = modes.filter_map(Value::as_str).collect();
    let short =
        [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")];
    short.iter().filter(|(long, _)| modes.contains(long)).map(|(_, short)| *short).collect::<Vec<_>>().join(",")
}

/// Endpoints': `ip:port` pairs, at most three then `+ N more...`.
pub fn endpoints() -> Vec<Column> {
    columns(vec![string("Endpoints", 0, "Endpoints of the service.", |e| {
        let mut pairs = Vec::new();
        for subset in items(e, "/subsets") {
            let ports: Vec<i64> = items(subset, "/ports").map(|p| count(p, "/port")).collect();
            for address in items(subset, "/addresses") {
                let ip = text(address, "/ip");
                if ports.is_empty() {
                    pairs.push(ip.to_string());
                }
                pairs.extend(ports.iter().map(|port| format!("{ip}:{port}")));
            }
        }
        json!(limited(pairs))
    })])
}

/// At most three entries joined, then `+ N more...`; `<none>` for none.
fn limited(entries: Vec<String>) -> String {
    const SHOWN: usize = 3;
    match entries.len() {
        0 => "<none>".into(),
        n if n > SHOWN => {
            format!("{} + {} more...", entries.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(","), n - SHOWN)
        }
        _ => entries.join(","),
    }
}

/// An EndpointSlice's: address type, ports, endpoints.
pub fn endpoint_slice() -> Vec<Column> {
    columns(vec![
        string("AddressType", 0, "Type of address carried by this EndpointSlice", |s| json!(text(s, "/addressType"))),
        string("Ports", 0, "Ports provided by this EndpointSlice", |s| {
            let ports: Vec<String> = items(s, "/ports").map(|p| count(p, "/port").to_string()).collect();
            json!(if ports.is_empty() { "<unset>".into() } else { ports.join(",") })
        }),
        string("Endpoints", 0, "Endpoints represented by this EndpointSlice", |s| {
            let addresses: Vec<String> = items(s, "/endpoints")
                .flat_map(|e| items(e, "/addresses").filter_map(Value::as_str))
                .map(str::to_string)
                .collect();
            json!(if addresses.is_empty() { "<unset>".into() } else { limited(addresses) })
        }),
    ])
}

/// An Ingress's: class, hosts, address, ports.
pub fn ingress() -> Vec<Column> {
    columns(vec![
        string("Class", 0, "The name of the IngressClass resource.", |i| or_none(text(i, "/spec/ingressClassName"))),
        string("Hosts", 0, "Hosts that incoming requests are matched against before the ingress rule", |i| {
            let hosts: Vec<&str> =
                items(i, "/spec/rules").map(|r| text(r, "/host")).filter(|h| !h.is_empty()).collect();
            json!(if hosts.is_empty() {
                "*".to_string()
            } else {
                limited(hosts.into_iter().map(str::to_string).collect())
            })
        }),
        string("Address", 0, "Address is a list containing ingress points for the load-balancer", |i| {
            let addresses: Vec<&str> = items(i, "/status/loadBalancer/ingress")
                .map(|a| if text(a, "/ip").is_empty() { text(a, "/hostname") } else { text(a, "/ip") })
                .collect();
            json!(addresses.join(","))
        }),
        string("Ports", 0, "Ports of TLS configurations that open", |i| {
            json!(if items(i, "/spec/tls").next().is_some() { "80, 443" } else { "80" })
        }),
    ])
}

/// A NetworkPolicy's: `Pod-Selector`.
pub fn network_policy() -> Vec<Column> {
    columns(vec![string("Pod-Selector", 0, "Pod selector of the network policy.", |n| {
        format_selector(n.pointer("/spec/podSelector"))
    })])
}

/// A StorageClass's: provisioner, reclaim policy, binding mode, expansion; the default class
/// named `(default)`, as upstream's printer names it.
pub fn storage_class() -> Vec<Column> {
    let mut columns = columns(vec![
        string("Provisioner", 0, "Indicates the type of the provisioner.", |s| json!(text(s, "/provisioner"))),
        string("ReclaimPolicy", 0, "Indicates the type of the reclaim policy.", |s| json!(text(s, "/reclaimPolicy"))),
        string("VolumeBindingMode", 0, "Indicates how PersistentVolumeClaims should be provisioned and bound.", |s| {
            json!(text(s, "/volumeBindingMode"))
        }),
        string("AllowVolumeExpansion", 0, "Indicates whether the storage class allow volume expand.", |s| {
            json!(s.get("allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false).to_string())
        }),
    ]);
    if let Some(name) = columns.first_mut() {
        *name = Column { source: Source::Computed(storage_class_name), ..Column::name() };
    }
    columns
}

fn storage_class_name(class: &Value) -> Value {
    let name = crate::object::name(class);
    let annotations = class.pointer("/metadata/annotations");
    let default = ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
        .iter()
        .any(|key| annotations.and_then(|a| a.get(*key)).and_then(Value::as_str) == Some("true"));
    json!(if default { format!("{name} (default)") } else { name.to_string() })
}

/// A PriorityClass's: value, global default, and (after `Age`, as upstream) preemption policy.
pub fn priority_class() -> Vec<Column> {
    let value = integer("Value", "The value of this priority class.", |p| json!(count(p, "/value")));
    let global = "globalDefault specifies whether this PriorityClass should be considered as the default priority.";
    let global = string("Global-Default", 0, global, |p| {
        json!(p.get("globalDefault").and_then(Value::as_bool).unwrap_or(false).to_string())
    });
    let preemption = "PreemptionPolicy is the Policy for preempting pods with lower priority.";
    let preemption = string("PreemptionPolicy", 0, preemption, |p| json!(text(p, "/preemptionPolicy")));
    columns_around_age(vec![value, global], vec![preemption])
}

/// A PodDisruptionBudget's: min available, max unavailable, allowed disruptions.
pub fn pod_disruption_budget() -> Vec<Column> {
    fn shown(value: Option<&Value>) -> Value {
        match value {
            Some(Value::String(text)) => json!(text),
            Some(Value::Number(number)) => json!(number.to_string()),
            _ => json!("N/A"),
        }
    }
    columns(vec![
        string("Min Available", 0, "The minimum number of pods that must be available.", |p| {
            shown(p.pointer("/spec/minAvailable"))
        }),
        string("Max Unavailable", 0, "The maximum number of pods that may be unavailable.", |p| {
            shown(p.pointer("/spec/maxUnavailable"))
        }),
        integer("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time.", |p| {
            json!(count(p, "/status/disruptionsAllowed"))
        }),
    ])
}

/// A binding's: `Role`; wide `Users`, `Groups`, `ServiceAccounts`.
pub fn binding() -> Vec<Column> {
    fn subjects(binding: &Value, kind: &str) -> Value {
        let names: Vec<String> = items(binding, "/subjects")
            .filter(|s| text(s, "/kind") == kind)
            .map(|s| match (kind, text(s, "/namespace")) {
                ("ServiceAccount", namespace) => format!("{namespace}/{}", text(s, "/name")),
                _ => text(s, "/name").to_string(),
            })
            .collect();
        json!(names.join(", "))
    }
    columns(vec![
        Column::new("Role", "string", 0, "The role bound.", Source::Pair(".roleRef.kind", ".roleRef.name")),
        string("Users", 1, "Users in the binding.", |b| subjects(b, "User")),
        string("Groups", 1, "Groups in the binding.", |b| subjects(b, "Group")),
        string("ServiceAccounts", 1, "ServiceAccounts in the binding.", |b| subjects(b, "ServiceAccount")),
    ])
}

/// A webhook configuration's: how many webhooks.
pub fn webhook_configuration() -> Vec<Column> {
    columns(vec![integer("Webhooks", "Webhooks indicates the number of webhooks.", |w| {
        json!(items(w, "/webhooks").count())
    })])
}

/// A RuntimeClass's: its handler.
pub fn runtime_class() -> Vec<Column> {
    columns(vec![string("Handler", 0, "Handler specifies the underlying runtime and configuration.", |r| {
        json!(text(r, "/handler"))
    })])
}

/// An IngressClass's: controller and parameters.
pub fn ingress_class() -> Vec<Column> {
    columns(vec![
        string("Controller", 0, "Controller that is responsible for handling this class", |i| {
            json!(text(i, "/spec/controller"))
        }),
        string("Parameters", 0, "A reference to a resource with additional parameters", |i| {
            let Some(parameters) = i.pointer("/spec/parameters") else { return json!("<none>") };
            let group = text(parameters, "/apiGroup");
            let kind = if group.is_empty() {
                text(parameters, "/kind").to_string()
            } else {
                format!("{}.{group}", text(parameters, "/kind"))
            };
            json!(format!("{kind}/{}", text(parameters, "/name")))
        }),
    ])
}

/// A PodTemplate's: `Containers`, `Images`, `Pod Labels` (no `Age`, as upstream).
pub fn pod_template() -> Vec<Column> {
    fn listed(template: &Value, field: &str) -> Value {
        json!(items(template, "/template/spec/containers").map(|c| text(c, field)).collect::<Vec<_>>().join(","))
    }
    vec![
        Column::name(),
        string("Containers", 0, "Names of each container in the template.", |t| listed(t, "/name")),
        string("Images", 0, "Images referenced by each container in the template.", |t| listed(t, "/image")),
        string("Pod Labels", 0, "The labels for the pod template.", |t| {
            format_labels(t.pointer("/template/metadata/labels"))
        }),
    ]
}

/// A ResourceQuota's: `Request` and `Limit`, `used/hard` per resource (limits apart).
pub fn resource_quota() -> Vec<Column> {
    fn usage(quota: &Value, limits: bool) -> Value {
        let hard = quota.pointer("/status/hard").and_then(Value::as_object);
        let mut names: Vec<&String> = hard.into_iter().flat_map(|h| h.keys()).collect();
        names.sort();
        let shown: Vec<String> = names
            .into_iter()
            .filter(|name| name.starts_with("limits.") == limits)
            .map(|name| {
                let used = quota.pointer(&format!("/status/used/{name}")).and_then(Value::as_str).unwrap_or("0");
                let hard = quota.pointer(&format!("/status/hard/{name}")).and_then(Value::as_str).unwrap_or_default();
                format!("{name}: {used}/{hard}")
            })
            .collect();
        json!(shown.join(", "))
    }
    columns_around_age(
        Vec::new(),
        vec![
            string(
                "Request",
                0,
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                |q| usage(q, false),
            ),
            string(
                "Limit",
                0,
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                |q| usage(q, true),
            ),
        ],
    )
}

/// A CertificateSigningRequest's: `SignerName`, `Requestor`, `RequestedDuration`, `Condition`
/// (after `Age`, as upstream).
pub fn certificate_signing_request() -> Vec<Column> {
    columns_around_age(
        Vec::new(),
        vec![
            string("SignerName", 0, "Only requests with the specified signer name are matched.", |c| {
                json!(text(c, "/spec/signerName"))
            }),
            string("Requestor", 0, "Name of the user that created the request.", |c| json!(text(c, "/spec/username"))),
            string("RequestedDuration", 0, "Requested duration of the issued certificate.", |c| {
                json!(
                    c.pointer("/spec/expirationSeconds")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<none>".to_string(), crate::table::human_duration)
                )
            }),
            string("Condition", 0, "Condition of the request.", |c| {
                let conditions: Vec<&str> = items(c, "/status/conditions").map(|c| text(c, "/type")).collect();
                json!(if conditions.is_empty() { "Pending".to_string() } else { conditions.join(",") })
            }),
        ],
    )
}

/// A ControllerRevision's: `Controller` (its owner), `Revision`.
pub fn controller_revision() -> Vec<Column> {
    columns(vec![
        string("Controller", 0, "Controller of the object.", |r| {
            let owner = items(r, "/metadata/ownerReferences").find(|o| o.get("controller") == Some(&json!(true)));
            json!(owner.map_or_else(
                || "<none>".to_string(),
                |o| {
                    let group = text(o, "/apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
                    let kind = text(o, "/kind").to_lowercase();
                    let kind = if group.is_empty() { kind } else { format!("{kind}.{group}") };
                    format!("{kind}/{}", text(o, "/name"))
                }
            ))
        }),
        integer("Revision", "The revision represented by Data.", |r| json!(count(r, "/revision"))),
    ])
}

/// A ValidatingAdmissionPolicy's: `Validations`, `ParamKind`.
pub fn validating_admission_policy() -> Vec<Column> {
    columns(vec![
        integer(
            "Validations",
            "Validations indicates the number of validation rules defined in this configuration",
            |p| json!(items(p, "/spec/validations").count()),
        ),
        string("ParamKind", 0, "ParamKind specifies the kind of resources used to parameterize this policy", |p| {
            json!(match p.pointer("/spec/paramKind") {
                Some(kind) => format!("{} {}", text(kind, "/apiVersion"), text(kind, "/kind")),
                None => "<unset>".into(),
            })
        }),
    ])
}

/// A ValidatingAdmissionPolicyBinding's: `PolicyName`, `ParamRef`.
pub fn validating_admission_policy_binding() -> Vec<Column> {
    columns(vec![
        string("PolicyName", 0, "PolicyName indicates the policy definition which the policy binding binded to", |b| {
            json!(text(b, "/spec/policyName"))
        }),
        string("ParamRef", 0, "ParamRef indicates the param resource which sets the configration param", |b| {
            json!(match b.pointer("/spec/paramRef") {
                Some(reference) if !text(reference, "/namespace").is_empty() => {
                    format!("{}/{}", text(reference, "/namespace"), text(reference, "/name"))
                }
                Some(reference) if !text(reference, "/name").is_empty() => format!("*/{}", text(reference, "/name")),
                Some(_) => "*/*".to_string(),
                None => "<unset>".to_string(),
            })
        }),
    ])
}

/// A CSINode's: how many drivers.
pub fn csi_node() -> Vec<Column> {
    columns(vec![integer("Drivers", "Drivers indicates the number of CSI drivers registered on the node", |n| {
        json!(items(n, "/spec/drivers").count())
    })])
}

/// A CSIDriver's: what it asks of the kubelet and the API.
pub fn csi_driver() -> Vec<Column> {
    fn flag(driver: &Value, field: &str) -> Value {
        json!(driver.pointer(&format!("/spec/{field}")).and_then(Value::as_bool).unwrap_or(false).to_string())
    }
    columns(vec![
        string("AttachRequired", 0, "Indicates this CSI volume driver requires an attach operation", |d| {
            flag(d, "attachRequired")
        }),
        string("PodInfoOnMount", 0, "Indicates this CSI volume driver requires additional pod information", |d| {
            flag(d, "podInfoOnMount")
        }),
        string("StorageCapacity", 0, "Indicates this CSI volume driver supports storage capacity tracking", |d| {
            flag(d, "storageCapacity")
        }),
        string("TokenRequests", 0, "Indicates this CSI volume driver requires tokens for the audiences", |d| {
            let audiences: Vec<&str> = items(d, "/spec/tokenRequests").map(|t| text(t, "/audience")).collect();
            or_none(&audiences.join(","))
        }),
        string(
            "RequiresRepublish",
            0,
            "Indicates this CSI volume driver requires NodePublishVolume being periodically called",
            |d| flag(d, "requiresRepublish"),
        ),
        string("Modes", 0, "Indicates volume lifecycle modes supported by this CSI volume driver", |d| {
            let modes: Vec<&str> = items(d, "/spec/volumeLifecycleModes").filter_map(Value::as_str).collect();
            or_none(&modes.join(","))
        }),
    ])
}

/// A VolumeAttachment's: `Attacher`, `PV`, `Node`, `Attached`.
pub fn volume_attachment() -> Vec<Column> {
    columns(vec![
        string("Attacher", 0, "Attacher indicates the name of the volume driver that MUST handle this request.", |v| {
            json!(text(v, "/spec/attacher"))
        }),
        string("PV", 0, "Name of the persistent volume to attach.", |v| {
            json!(text(v, "/spec/source/persistentVolumeName"))
        }),
        string("Node", 0, "The node that the volume should be attached to.", |v| json!(text(v, "/spec/nodeName"))),
        string("Attached", 0, "Indicates the volume is successfully attached.", |v| {
            json!(v.pointer("/status/attached").and_then(Value::as_bool).unwrap_or(false).to_string())
        }),
    ])
}

/// A CSIStorageCapacity's: `StorageClassName`, `Capacity` (no `Age`, as upstream).
pub fn csi_storage_capacity() -> Vec<Column> {
    vec![
        Column::name(),
        string("StorageClassName", 0, "The storage class the capacity is for.", |c| {
            json!(text(c, "/storageClassName"))
        }),
        string("Capacity", 0, "The capacity.", |c| unset(text(c, "/capacity"))),
    ]
}

/// A FlowSchema's: priority level, precedence, distinguisher, and whether the level is missing.
pub fn flow_schema() -> Vec<Column> {
    columns_around_age(
        vec![
            string("PriorityLevel", 0, "The name of the priority level configuration", |f| {
                json!(text(f, "/spec/priorityLevelConfiguration/name"))
            }),
            integer("MatchingPrecedence", "The precedence of this flow schema", |f| {
                json!(count(f, "/spec/matchingPrecedence"))
            }),
            string("DistinguisherMethod", 0, "The distinguisher method", |f| {
                or_none(text(f, "/spec/distinguisherMethod/type"))
            }),
        ],
        vec![string("MissingPL", 0, "references a broken or non-existent PriorityLevelConfiguration", |f| {
            let dangling =
                items(f, "/status/conditions").find(|c| text(c, "/type") == "Dangling").map(|c| text(c, "/status"));
            json!(dangling.unwrap_or("?"))
        })],
    )
}

/// A PriorityLevelConfiguration's: type, shares, queues.
pub fn priority_level_configuration() -> Vec<Column> {
    fn queuing(level: &Value, field: &str) -> Value {
        match level.pointer(&format!("/spec/limited/limitResponse/queuing/{field}")) {
            Some(value) => json!(value.to_string()),
            None => json!("<none>"),
        }
    }
    columns(vec![
        string("Type", 0, "The type of the priority level", |l| json!(text(l, "/spec/type"))),
        string("NominalConcurrencyShares", 0, "The nominal concurrency shares", |l| {
            let shares = l
                .pointer("/spec/limited/nominalConcurrencyShares")
                .or_else(|| l.pointer("/spec/exempt/nominalConcurrencyShares"));
            json!(shares.map_or_else(|| "<none>".to_string(), ToString::to_string))
        }),
        string("Queues", 0, "Number of queues", |l| queuing(l, "queues")),
        string("HandSize", 0, "The hand size", |l| queuing(l, "handSize")),
        string("QueueLengthLimit", 0, "The queue length limit", |l| queuing(l, "queueLengthLimit")),
    ])
}

/// An IPAddress's: `ParentRef` (no `Age`, as upstream).
pub fn ip_address() -> Vec<Column> {
    vec![
        Column::name(),
        string(
            "ParentRef",
            0,
            "ParentRef references the resource (usually a Service) that an IPAddress is attached to.",
            |a| {
                let Some(parent) = a.pointer("/spec/parentRef") else { return json!("<none>") };
                let resource = match text(parent, "/group") {
                    "" => text(parent, "/resource").to_string(),
                    group => format!("{}.{group}", text(parent, "/resource")),
                };
                json!(format!("{resource}/{}/{}", text(parent, "/namespace"), text(parent, "/name")))
            },
        ),
    ]
}

/// A ServiceCIDR's: `CIDRs`.
pub fn service_cidr() -> Vec<Column> {
    columns(vec![string("CIDRs", 0, "list of IPv4 or IPv6 CIDRs", |c| {
        let cidrs: Vec<&str> = items(c, "/spec/cidrs").filter_map(Value::as_str).collect();
        json!(cidrs.join(","))
    })])
}

/// An APIService's: `Service`, `Available`.
pub fn api_service() -> Vec<Column> {
    columns(vec![
        string("Service", 0, "The reference to the service that hosts this API endpoint.", |a| {
            json!(match a.pointer("/spec/service") {
                Some(service) => format!("{}/{}", text(service, "/namespace"), text(service, "/name")),
                None => "Local".to_string(),
            })
        }),
        string("Available", 0, "Whether this service is available.", |a| {
            let available = items(a, "/status/conditions").find(|c| text(c, "/type") == "Available");
            json!(match available {
                Some(condition) if text(condition, "/status") == "True" => "True".to_string(),
                Some(condition) => format!("{} ({})", text(condition, "/status"), text(condition, "/reason")),
                None => "Unknown".to_string(),
            })
        }),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(columns: &[Column], object: &Value) -> Vec<Value> {
        columns
            .iter()
            .filter_map(|c| match &c.source {
                Source::Computed(print) => Some(print(object)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pods_print_as_upstreams_print_pod() {
        let created = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(cells(&pod(), &created)[..3], [json!("0/2"), json!(""), json!("0")]);
        let running = json!({"spec": {"containers": [{"name": "a"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        assert_eq!(
            cells(&pod(), &running),
            [
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("10.0.0.5"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let crashing = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "a", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(cells(&pod(), &crashing)[1], json!("CrashLoopBackOff"));
        assert_eq!(cells(&pod(), &crashing)[2], json!("3"));
        let initializing = json!({"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}});
        assert_eq!(cells(&pod(), &initializing)[1], json!("Init:0/1"));
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-12-05T00:00:00Z"}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        assert_eq!(cells(&pod(), &deleting)[1], json!("Terminating"));
    }

    #[test]
    fn workloads_and_others_print_as_upstream() {
        let job = json!({"spec": {"completions": 3}, "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(cells(&super::job(), &job)[..2], [json!("Complete"), json!("1/3")]);
        let node = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}, "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        assert_eq!(
            cells(&super::node(), &node)[..3],
            [json!("Ready,SchedulingDisabled"), json!("control-plane"), json!("v1.33.0")]
        );
        let policy = json!({"spec": {"podSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}});
        assert_eq!(cells(&network_policy(), &policy), [json!("app=web,tier in (a,b)")]);
        let claim = json!({"spec": {"volumeName": "pv1", "storageClassName": "fast"}, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        assert_eq!(
            cells(&persistent_volume_claim(), &claim)[..4],
            [json!("Bound"), json!("pv1"), json!("1Gi"), json!("RWO,RWX")]
        );
        let endpoints = json!({"subsets": [{"addresses": [{"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(cells(&super::endpoints(), &endpoints), [json!("1.1.1.1:80,1.1.1.1:443,2.2.2.2:80 + 1 more...")]);
        let class = json!({"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "p"});
        assert_eq!(storage_class_name(&class), json!("fast (default)"));
        let names: Vec<String> = deployment().iter().map(|c| format!("{}:{}", c.name, c.priority)).collect();
        assert_eq!(
            names,
            ["Name:0", "Ready:0", "Up-to-date:0", "Available:0", "Age:0", "Containers:1", "Images:1", "Selector:1"]
        );
    }

    #[test]
    fn the_other_kinds_print_as_upstream() {
        let quota = json!({"status": {"hard": {"pods": "4", "limits.cpu": "2"}, "used": {"pods": "1"}}});
        assert_eq!(cells(&resource_quota(), &quota), [json!("pods: 1/4"), json!("limits.cpu: 0/2")]);
        let names: Vec<String> = resource_quota().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, ["Name", "Age", "Request", "Limit"]);
        let revision = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": true}]}, "revision": 3});
        assert_eq!(cells(&controller_revision(), &revision), [json!("statefulset.apps/db"), json!(3)]);
        let binding = json!({"spec": {"policyName": "p", "paramRef": {"name": "limits"}}});
        assert_eq!(cells(&validating_admission_policy_binding(), &binding), [json!("p"), json!("*/limits")]);
        let service =
            json!({"status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(cells(&api_service(), &service), [json!("Local"), json!("False (MissingEndpoints)")]);
    }
}
