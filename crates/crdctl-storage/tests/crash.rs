//! Crash consistency of the redb store: a child process writes from many tasks and reports
//! each acknowledged write; it is killed with SIGKILL mid-stream, the store is reopened, and
//! every acknowledged write must be there, with the revisions it was acknowledged at.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_storage::Store;

const CHILD_DIR: &str = "CRDCTL_CRASH_CHILD_DIR";
const CHILD_ROUND: &str = "CRDCTL_CRASH_CHILD_ROUND";

/// Not a test on its own: the child the crash test starts (it runs only with `--ignored`).
#[test]
#[ignore = "started by acknowledged_writes_survive_sigkill"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let round = std::env::var(CHILD_ROUND).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = Arc::new(crdctl_storage::redb::open(std::path::Path::new(&dir)).unwrap());
        let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let (store, out, round) = (Arc::clone(&store), Arc::clone(&out), round.clone());
                tokio::spawn(async move {
                    for i in 0.. {
                        let key = format!("/r/{round}/{writer}/{i}");
                        let entry = store.create(&key, key.as_bytes().to_vec()).await.unwrap();
                        let mut out = out.lock().unwrap();
                        writeln!(out, "{key} {}", entry.mod_revision).unwrap();
                        out.flush().unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
    });
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut acknowledged = Vec::new();
        let started = Instant::now();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while acknowledged.len() < 300 && started.elapsed() < Duration::from_secs(60) {
            let Some(Ok(line)) = lines.next() else { break };
            // The harness prefixes the first line with `test crash_child ... `.
            if let Some((key, revision)) = line.rsplit(' ').nth(1).zip(line.rsplit(' ').next())
                && let Ok(revision) = revision.parse::<u64>()
            {
                acknowledged.push((key.to_string(), revision));
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(acknowledged.len() >= 300, "the child acknowledged only {} writes", acknowledged.len());

        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let store = crdctl_storage::redb::open(dir.path()).unwrap();
            for (key, revision) in &acknowledged {
                let entry = store.get(key).await.unwrap().unwrap_or_else(|| panic!("round {round}: {key} was lost"));
                assert_eq!(entry.mod_revision, *revision, "{key}");
                assert_eq!(entry.value, key.as_bytes());
            }
            let last = acknowledged.iter().map(|(_, revision)| *revision).max().unwrap();
            assert!(store.revision().await.unwrap() >= last);
        });
    }
}
