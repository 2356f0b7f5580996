//! What RBAC costs an authorized request, against the same request on a server that allows
//! every request, measured in the same run.
//!
//! Two servers (in-process, in-memory stores, each on a runtime of its own) know the same
//! user by a static token. One decides by `AlwaysAllow`; the other by RBAC, holding the
//! bootstrap policy and 1,000 bindings of other users besides (half ClusterRoleBindings, half
//! RoleBindings in the namespace asked about), with the user's own RoleBinding to `edit`
//! (an aggregated ClusterRole) among them. One client gets a ConfigMap over one connection,
//! in alternating slices; the median of each is reported, with their ratio. Target ≥ 0.9.
//!
//! Run: `cargo bench -p crdctl-bench --bench authorization`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

// The shared load generator; this benchmark uses part of it.
#[allow(dead_code)]
#[path = "common/load.rs"]
mod load;

use std::sync::Arc;

use crdctl_server::Config;
use crdctl_server::auth::Mode;
use crdctl_server::testing::TestServer;
use load::{Connection, Peer};
use serde_json::json;

const SLICES: usize = 5;
const BINDINGS: usize = 1_000;
const TOKEN: &str = "jane-token";
const ADMIN_TOKEN: &str = "admin-token";
const CONFIG_MAP: &str = "/api/v1/namespaces/default/configmaps/settings";
const TARGET: f64 = 0.9;

async fn server(peer: &Peer, mode: Mode, tokens: std::path::PathBuf) -> TestServer {
    let config = Config { token_auth_file: Some(tokens), authorization: mode, ..Config::default() };
    peer.run(async move { TestServer::start_with(config, Arc::new(crdctl_storage::memory::open())).await.unwrap() })
        .await
}

fn binding(kind: &str, name: &str, role: &str, user: &str) -> String {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
    .to_string()
}

/// Gets/s of the ConfigMap as the token's user, one client.
async fn gets(base: String) -> f64 {
    let connection = Arc::new(tokio::sync::Mutex::new(Connection::open_as(&base, TOKEN).await));
    load::rate(1, move |_, _| {
        let connection = Arc::clone(&connection);
        async move {
            let (code, body) = connection.lock().await.send(reqwest::Method::GET, CONFIG_MAP, None).await;
            assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        }
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{TOKEN},jane,u-jane\n{ADMIN_TOKEN},admin,u-admin,system:masters\n")).unwrap();
    let (allow_peer, rbac_peer) = (Peer::new(1), Peer::new(1));
    let allowing = server(&allow_peer, Mode::AlwaysAllow, tokens.clone()).await;
    let deciding = server(&rbac_peer, Mode::Rbac, tokens).await;
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}).to_string();
    let setup = reqwest::Client::new();
    let post = |base: String, path: &'static str, body: String| {
        let request = setup.post(format!("{base}{path}")).bearer_auth(ADMIN_TOKEN);
        async move { request.header("Content-Type", "application/json").body(body).send().await.unwrap().status().as_u16() }
    };
    for server in [&allowing, &deciding] {
        assert_eq!(post(server.url(), "/api/v1/namespaces/default/configmaps", config_map.clone()).await, 201);
    }
    for n in 0..BINDINGS {
        let (path, body) = match n % 2 {
            0 => (
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                binding("ClusterRoleBinding", &format!("b{n}"), "view", &format!("user-{n}")),
            ),
            _ => (
                "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                binding("RoleBinding", &format!("b{n}"), "view", &format!("user-{n}")),
            ),
        };
        assert_eq!(post(deciding.url(), path, body).await, 201);
        if n == BINDINGS / 2 {
            let own = binding("RoleBinding", "jane-edits", "edit", "jane");
            let path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
            assert_eq!(post(deciding.url(), path, own).await, 201);
        }
    }

    println!("authorized gets of a ConfigMap by a token's user (one client, in-memory store)");
    let (mut allowed, mut decided) = (Vec::new(), Vec::new());
    for _ in 0..SLICES {
        allowed.push(gets(allowing.url()).await);
        decided.push(gets(deciding.url()).await);
    }
    let median = |rates: &mut Vec<f64>| {
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let (allowed, decided) = (median(&mut allowed), median(&mut decided));
    let ratio = decided / allowed;
    println!("  gets/s, AlwaysAllow                            {allowed:>9.0}");
    println!("  gets/s, RBAC with {BINDINGS} bindings              {decided:>9.0}   {ratio:.2}× (target ≥ {TARGET})");
    drop((allowing, deciding));
    let mut targets = targets::Targets::default();
    targets.expect(ratio >= TARGET, format!("RBAC gets {ratio:.2}× AlwaysAllow's (≥ {TARGET})"));
    targets.finish();
}
