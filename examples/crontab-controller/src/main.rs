//! Runs the CronTab controller against the cluster of the current kubeconfig (e.g. the one
//! `crdctl serve` prints) until Ctrl-C.

#[tokio::main]
async fn main() -> Result<(), kube::Error> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let client = kube::Client::try_default().await?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    crontab_controller::run(client, shutdown).await;
    Ok(())
}
