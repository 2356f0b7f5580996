//! Runs the CronTab controller against the cluster of the current kubeconfig (e.g. the one
//! `crdctl serve` prints) until Ctrl-C.

#[tokio::main]
async fn main() -> Result<(), kube::Error> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let client = kube::Client::try_default().await?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let election = crontab_controller::Election {
        identity: std::env::var("POD_NAME").unwrap_or_else(|_| format!("crontab-controller-{}", std::process::id())),
        namespace: client.default_namespace().to_string(),
        lease_duration: std::time::Duration::from_secs(15),
    };
    crontab_controller::run(client, election, shutdown).await;
    Ok(())
}
