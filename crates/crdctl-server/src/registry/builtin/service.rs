//! Services' addresses, as kube-apiserver 1.33 allocates them (`pkg/registry/core/service`,
//! `ipallocator`, `portallocator`): a ClusterIP from `--service-cluster-ip-range` for every
//! Service but headless and `ExternalName` ones, and a node port from
//! `--service-node-port-range` for every port of a `NodePort` or `LoadBalancer` Service.
//!
//! Each allocated address is an `IPAddress` object (`networking.k8s.io/v1`) named by the
//! address, as the `MultiCIDRServiceAllocator` (GA in 1.33) keeps them; each node port a key
//! `/registry/servicenodeports/<port>`. Both are created only if absent, so concurrent creates,
//! and server replicas sharing etcd, never hand out one twice. Deleting a Service releases
//! them. The `kubernetes` Service in `default` holds the range's first address.

use std::net::Ipv4Addr;

use crdctl_model::field::{self, Path, Raw};
use crdctl_storage::{Store, StoreError};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::ranges::{Reserved, ServiceRanges, release_keys};

/// Where `IPAddress` objects are stored.
pub const IP_ADDRESSES: &str = "/registry/ipaddresses/";
const NODE_PORTS: &str = "/registry/servicenodeports/";

/// Random probes before a full scan of what is allocated.
const PROBES: u32 = 8;

fn random() -> u32 {
    // The low bits of a v4 UUID are random.
    uuid::Uuid::new_v4().as_u128() as u32
}

fn spec_str<'a>(service: &'a Value, field: &str) -> &'a str {
    service.pointer(&format!("/spec/{field}")).and_then(Value::as_str).unwrap_or_default()
}

fn wants_cluster_ip(service: &Value) -> bool {
    spec_str(service, "type") != "ExternalName" && spec_str(service, "clusterIP") != "None"
}

fn wants_node_ports(service: &Value) -> bool {
    matches!(spec_str(service, "type"), "NodePort" | "LoadBalancer")
}

fn node_ports(service: &Value) -> Vec<u16> {
    let ports = service.pointer("/spec/ports").and_then(Value::as_array);
    let numbers = ports.into_iter().flatten().filter_map(|p| p.get("nodePort")?.as_u64());
    numbers.filter_map(|n| u16::try_from(n).ok()).collect()
}

/// The keys a Service holds in the store: its ClusterIP's `IPAddress` and its node ports.
fn held_keys(service: &Value) -> Vec<String> {
    let mut keys: Vec<String> = node_ports(service).iter().map(|port| format!("{NODE_PORTS}{port}")).collect();
    let ip = spec_str(service, "clusterIP");
    if wants_cluster_ip(service) && ip.parse::<Ipv4Addr>().is_ok() {
        keys.push(format!("{IP_ADDRESSES}{ip}"));
    }
    keys
}

/// Gives `service` its addresses: on create (`old` is `None`) every address it needs; on update
/// the ones it had, and new ones for what it newly needs. A ClusterIP or node port the client
/// names must be free and in range.
pub async fn allocate(
    store: &dyn Store,
    service: &mut Value,
    old: Option<&Value>,
    ranges: &ServiceRanges,
) -> ApiResult<Reserved> {
    let name = crate::object::name(service).to_string();
    let namespace = crate::object::meta_str(service, "namespace").unwrap_or_default().to_string();
    let mut reserved = Reserved::default();
    let result = allocate_into(store, service, old, ranges, &namespace, &name, &mut reserved).await;
    match result {
        Ok(()) => Ok(reserved),
        Err(err) => {
            reserved.release(store).await;
            Err(err)
        }
    }
}

async fn allocate_into(
    store: &dyn Store,
    service: &mut Value,
    old: Option<&Value>,
    ranges: &ServiceRanges,
    namespace: &str,
    name: &str,
    reserved: &mut Reserved,
) -> ApiResult<()> {
    let spec_path = Path::new("spec");
    let invalid = |errors: Vec<field::Error>| ApiError::invalid("", "Service", name, &errors);
    let external_name = |service: &Value| spec_str(service, "type") == "ExternalName";
    if let Some(old) = old.filter(|old| !external_name(old) && !external_name(service)) {
        let had = spec_str(old, "clusterIP").to_string();
        let asked = spec_str(service, "clusterIP").to_string();
        if asked.is_empty() {
            // `patchAllocatedValues`: what the client left out is what the Service holds
            // (a headless Service stays headless).
            let spec = crate::object::fields_mut(service).entry("spec").or_insert_with(|| json!({}));
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if let Some(value) = old.pointer(&format!("/spec/{field}")) {
                    crate::object::set(spec, field, value.clone());
                }
            }
        } else if let (Some(had), Some(asked)) = (old.pointer("/spec/clusterIPs"), service.pointer("/spec/clusterIPs"))
            && had.get(0) != asked.get(0)
        {
            // A client that speaks the plural field is answered about it
            // (`validateUpgradeDowngradeClusterIPs`)…
            let ips = super::immutable::shown(Some(asked));
            return Err(invalid(vec![spec_path.child("clusterIPs").index(0).invalid(ips, "may not change once set")]));
        } else if !had.is_empty() && asked != had {
            // …one that changes the singular alone (`kubectl apply` of a manifest naming
            // `clusterIP`) about that, as upstream's command-line tests expect: headless or not,
            // an address once set stays.
            return Err(invalid(vec![spec_path.child("clusterIP").invalid(&asked, "field is immutable")]));
        }
    }
    if wants_cluster_ip(service) && spec_str(service, "clusterIP").is_empty() {
        let ip = reserve_ip(store, ranges, namespace, name, None).await?;
        reserved.0.push(format!("{IP_ADDRESSES}{ip}"));
        set_cluster_ip(service, ip);
    } else if wants_cluster_ip(service)
        && old.is_none_or(|old| spec_str(old, "clusterIP") != spec_str(service, "clusterIP"))
    {
        let asked = spec_str(service, "clusterIP").to_string();
        let ips = Raw(format!("[]string{{{}}}", crdctl_model::go::quote(&asked)));
        let failed = |detail: String| invalid(vec![spec_path.child("clusterIPs").invalid(ips.clone(), detail)]);
        let ip: Ipv4Addr =
            asked.parse().map_err(|_| failed(format!("failed to allocate IP {asked}: must be a valid IP address")))?;
        if !ranges.cluster_ips.contains(ip) {
            let range = ranges.cluster_ips;
            return Err(failed(format!(
                "failed to allocate IP {asked}: the provided IP ({asked}) is not in the valid range. The range of valid IPs is {range}"
            )));
        }
        reserve_ip(store, ranges, namespace, name, Some(ip))
            .await
            .map_err(|_| failed(format!("failed to allocate IP {asked}: provided IP is already allocated")))?;
        reserved.0.push(format!("{IP_ADDRESSES}{asked}"));
        set_cluster_ip(service, ip);
    }
    if !wants_node_ports(service) {
        return Ok(());
    }
    let held: Vec<u16> = old.map(node_ports).unwrap_or_default();
    let ports = crate::object::fields_mut(service).get_mut("spec").and_then(|s| s.get_mut("ports"));
    let ports = ports.and_then(Value::as_array_mut).map(std::mem::take).unwrap_or_default();
    let mut written = Vec::with_capacity(ports.len());
    for (at, mut port) in ports.into_iter().enumerate() {
        let asked = port.get("nodePort").and_then(Value::as_u64);
        let node_port = match asked.and_then(|n| u16::try_from(n).ok()) {
            Some(number) if held.contains(&number) => number,
            Some(number) => {
                let ports_path = spec_path.child("ports");
                let port_path = ports_path.index(at);
                let at = port_path.child("nodePort");
                let range = &ranges.node_ports;
                if !range.contains(&number) {
                    let detail = format!(
                        "provided port is not in the valid range. The range of valid ports is {}-{}",
                        range.start(),
                        range.end()
                    );
                    return Err(invalid(vec![at.invalid(Raw(number.to_string()), detail)]));
                }
                if !reserve_port(store, number, namespace, name).await? {
                    return Err(invalid(vec![
                        at.invalid(Raw(number.to_string()), "provided port is already allocated"),
                    ]));
                }
                reserved.0.push(format!("{NODE_PORTS}{number}"));
                number
            }
            None => {
                let number = free_port(store, ranges, namespace, name).await?;
                reserved.0.push(format!("{NODE_PORTS}{number}"));
                number
            }
        };
        crate::object::set(&mut port, "nodePort", json!(node_port));
        written.push(port);
    }
    if let Some(spec) = service.get_mut("spec") {
        crate::object::set(spec, "ports", Value::Array(written));
    }
    Ok(())
}

fn set_cluster_ip(service: &mut Value, ip: Ipv4Addr) {
    let spec = crate::object::fields_mut(service).entry("spec").or_insert_with(|| json!({}));
    crate::object::set(spec, "clusterIP", json!(ip.to_string()));
    crate::object::set(spec, "clusterIPs", json!([ip.to_string()]));
    crate::object::set(spec, "ipFamilies", json!(["IPv4"]));
    crate::object::set(spec, "ipFamilyPolicy", json!("SingleStack"));
}

/// The `IPAddress` object that records `ip` as the Service's.
fn ip_address(ip: Ipv4Addr, namespace: &str, name: &str) -> Value {
    let mut object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": ip.to_string(), "labels": {
            "ipaddress.kubernetes.io/ip-family": "IPv4", "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": namespace, "name": name}},
    });
    crate::object::prepare_create(&mut object, None);
    object
}

/// Reserves `wanted`, or a free address: a few random probes, then a scan of what is taken.
async fn reserve_ip(
    store: &dyn Store,
    ranges: &ServiceRanges,
    namespace: &str,
    name: &str,
    wanted: Option<Ipv4Addr>,
) -> ApiResult<Ipv4Addr> {
    let range = ranges.cluster_ips;
    let create = |ip: Ipv4Addr| async move {
        let bytes = crate::object::to_stored(&ip_address(ip, namespace, name));
        match store.create(&format!("{IP_ADDRESSES}{ip}"), bytes).await {
            Ok(_) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(err) => Err(ApiError::internal_error(err)),
        }
    };
    if let Some(ip) = wanted {
        return match create(ip).await? {
            true => Ok(ip),
            false => Err(ApiError::internal_error("provided IP is already allocated")),
        };
    }
    // The first address is the `kubernetes` Service's.
    let usable = range.usable().saturating_sub(1);
    for _ in 0..PROBES.min(usable) {
        let ip = range.nth(1 + random() % usable.max(1));
        if create(ip).await? {
            return Ok(ip);
        }
    }
    let taken = store.list(crdctl_storage::ListOptions { prefix: IP_ADDRESSES, ..Default::default() }).await;
    let taken: std::collections::HashSet<String> = taken
        .map_err(ApiError::internal_error)?
        .entries
        .iter()
        .map(|e| e.key.trim_start_matches(IP_ADDRESSES).to_string())
        .collect();
    for n in 1..=usable {
        let ip = range.nth(n);
        if !taken.contains(&ip.to_string()) && create(ip).await? {
            return Ok(ip);
        }
    }
    Err(ApiError::internal_error("failed to allocate a serviceIP: range is full"))
}

async fn reserve_port(store: &dyn Store, port: u16, namespace: &str, name: &str) -> ApiResult<bool> {
    let holder = serde_json::to_vec(&json!({"namespace": namespace, "name": name})).unwrap_or_default();
    match store.create(&format!("{NODE_PORTS}{port}"), holder).await {
        Ok(_) => Ok(true),
        Err(StoreError::AlreadyExists { .. }) => Ok(false),
        Err(err) => Err(ApiError::internal_error(err)),
    }
}

async fn free_port(store: &dyn Store, ranges: &ServiceRanges, namespace: &str, name: &str) -> ApiResult<u16> {
    let (start, end) = (*ranges.node_ports.start(), *ranges.node_ports.end());
    let size = u32::from(end - start) + 1;
    let first = random() % size;
    for step in 0..size {
        let port = start + u16::try_from((first + step) % size).unwrap_or_default();
        if reserve_port(store, port, namespace, name).await? {
            return Ok(port);
        }
    }
    Err(ApiError::internal_error("failed to allocate a nodePort: range is full"))
}

/// Releases what a deleted Service held; after an update, what `old` held that `new` does not.
pub async fn release(store: &dyn Store, old: &Value, new: Option<&Value>) {
    let kept = new.map(held_keys).unwrap_or_default();
    release_keys(store, held_keys(old).into_iter().filter(|key| !kept.contains(key)).collect()).await;
}

/// The `kubernetes` Service in `default` (the range's first address, port 443 to the server's
/// port), its Endpoints, and the `kubernetes` ServiceCIDR, as kube-apiserver keeps them.
pub async fn create_kubernetes_service(store: &dyn Store, ranges: &ServiceRanges, port: u16) {
    let ip = ranges.cluster_ips.nth(0);
    let mut service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
                 "type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"},
    });
    set_cluster_ip(&mut service, ip);
    let mut endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "kubernetes"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
    });
    let mut cidr = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "kubernetes"},
        "spec": {"cidrs": [ranges.cluster_ips.to_string()]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "", "message": "Kubernetes Service CIDR is ready",
                                   "lastTransitionTime": crate::object::now_timestamp()}]},
    });
    crate::object::prepare_create(&mut service, Some("default"));
    crate::object::prepare_create(&mut endpoints, Some("default"));
    crate::object::prepare_create(&mut cidr, None);
    let writes = [
        (format!("{IP_ADDRESSES}{ip}"), ip_address(ip, "default", "kubernetes")),
        ("/registry/services/specs/default/kubernetes".to_string(), service),
        ("/registry/services/endpoints/default/kubernetes".to_string(), endpoints),
        ("/registry/servicecidrs/kubernetes".to_string(), cidr),
    ];
    for (key, object) in writes {
        match store.create(&key, crate::object::to_stored(&object)).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(err) => tracing::warn!(key, error = %err, "cannot create the kubernetes Service"),
        }
    }
}
