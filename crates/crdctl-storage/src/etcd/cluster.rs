//! Real etcd processes on free loopback ports in a temporary directory, for tests and
//! benchmarks: one member or several forming a cluster, each of which can be killed and
//! restarted on its data.
//!
//! It runs the `etcd` that `scripts/peers` installs (see [`crate::peers`]); without it,
//! [`LocalCluster::start`] fails and says so, it never pretends.

#![expect(
    clippy::indexing_slicing,
    reason = "a test harness: a member index out of range is a bug in the test that names it"
)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a member has to answer `/health` after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a start is tried on new ports when one was taken meanwhile.
const START_ATTEMPTS: usize = 5;

/// One etcd member.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
    /// Where this run's part of the log starts.
    log_start: usize,
}

/// A local etcd cluster; every member is killed when it is dropped.
pub struct LocalCluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
    token: String,
    /// PEM certificate and key the members serve clients with (https), if any.
    tls: Option<(PathBuf, PathBuf)>,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl LocalCluster {
    /// Starts `size` members and waits until each is healthy.
    pub fn start(size: usize) -> std::io::Result<LocalCluster> {
        LocalCluster::start_on(size, None, free_port)
    }

    /// Starts `size` members serving clients over https with a PEM certificate and key.
    pub fn start_tls(size: usize, cert: PathBuf, key: PathBuf) -> std::io::Result<LocalCluster> {
        LocalCluster::start_on(size, Some((cert, key)), free_port)
    }

    /// Starts on the ports `port` hands out. A port found free can be taken before etcd binds
    /// it (by another test's connection, say): then the cluster starts again on other ports.
    fn start_on(
        size: usize,
        tls: Option<(PathBuf, PathBuf)>,
        mut port: impl FnMut() -> std::io::Result<u16>,
    ) -> std::io::Result<LocalCluster> {
        let mut attempt = 1;
        loop {
            match LocalCluster::start_once(size, tls.clone(), &mut port) {
                Err(err) if attempt < START_ATTEMPTS && err.to_string().contains("address already in use") => {
                    attempt = attempt.saturating_add(1);
                }
                started => return started,
            }
        }
    }

    fn start_once(
        size: usize,
        tls: Option<(PathBuf, PathBuf)>,
        port: &mut impl FnMut() -> std::io::Result<u16>,
    ) -> std::io::Result<LocalCluster> {
        let dir = tempfile::tempdir()?;
        let token = dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut members = Vec::new();
        for index in 0..size {
            members.push(Member {
                name: format!("m{index}"),
                client_port: port()?,
                peer_port: port()?,
                child: None,
                log_start: 0,
            });
        }
        let mut cluster = LocalCluster { dir, members, token, tls };
        for index in 0..size {
            cluster.spawn(index)?;
        }
        for index in 0..size {
            cluster.wait_healthy(index)?;
        }
        Ok(cluster)
    }

    /// The members' client URLs, for `--etcd`.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| self.client_url(m)).collect()
    }

    fn client_url(&self, member: &Member) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", member.client_port)
    }

    /// Where member `index` logs.
    pub fn log(&self, index: usize) -> PathBuf {
        self.dir.path().join(format!("{}.log", self.members[index].name))
    }

    fn spawn(&mut self, index: usize) -> std::io::Result<()> {
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let member = &self.members[index];
        let client = self.client_url(member);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log(index))?;
        let log_start = usize::try_from(log.metadata()?.len()).unwrap_or(usize::MAX);
        let mut command = Command::new(crate::peers::binary("etcd")?);
        if let Some((cert, key)) = &self.tls {
            command.arg("--cert-file").arg(cert).arg("--key-file").arg(key);
        }
        let child = command
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&member.name))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial_cluster, "--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|err| std::io::Error::new(err.kind(), format!("cannot run etcd: {err}")))?;
        self.members[index].child = Some(child);
        self.members[index].log_start = log_start;
        Ok(())
    }

    fn wait_healthy(&mut self, index: usize) -> std::io::Result<()> {
        let deadline = Instant::now().checked_add(START_TIMEOUT).unwrap_or_else(Instant::now);
        let port = self.members[index].client_port;
        while Instant::now() < deadline {
            if let Some(child) = self.members[index].child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(self.log(index)).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(std::io::Error::other(format!("etcd exited with {status}: {}", tail.join(" | "))));
            }
            // Over https the log says when the member serves (this module speaks no TLS).
            let ready = match self.tls {
                None => healthy(port),
                Some(_) => {
                    let log = std::fs::read(self.log(index)).unwrap_or_default();
                    let run = log.get(self.members[index].log_start..).unwrap_or_default();
                    String::from_utf8_lossy(run).contains("ready to serve client requests")
                }
            };
            if ready {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(format!("etcd on port {port} was not healthy within {START_TIMEOUT:?}")))
    }

    /// The process id of member `index`, while it runs (to read its memory).
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.members[index].child.as_ref().map(Child::id)
    }

    /// Kills member `index` with SIGKILL, keeping its data.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `index` again on its data and waits until it is healthy.
    pub fn restart(&mut self, index: usize) -> std::io::Result<()> {
        self.kill(index);
        self.spawn(index)?;
        self.wait_healthy(index)
    }
}

/// Whether etcd answers `GET /health` on `port` with `"health":"true"`.
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_whose_port_is_taken_starts_again_on_other_ports() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_port = taken.local_addr().unwrap().port();
        let mut handed = 0;
        let cluster = LocalCluster::start_on(1, None, || {
            handed += 1;
            if handed == 1 { Ok(taken_port) } else { free_port() }
        })
        .unwrap();
        // The first attempt's client port was held here, so etcd could not bind it.
        assert_eq!(handed, 4, "two ports per attempt, two attempts");
        assert!(!cluster.endpoints()[0].ends_with(&format!(":{taken_port}")), "{:?}", cluster.endpoints());
        assert!(healthy(cluster.members[0].client_port));
    }
}
